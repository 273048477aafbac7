//! The single-process reference run: the same global batches, the same bucket chunking
//! and summation order as a correct ring, the first member's initial parameters, so its
//! digest of every step equals what a correct cluster commits — bit for bit.
//!
//! The members of each step are an input (`--members`, read from the run's step records):
//! a group that shrank or grew takes its global batch from the rest of the epoch by the
//! re-split rule of [`crate::core::DataPos`] and divides the gradient sum by its size.

use crate::config::TrainConfig;
use crate::core::ring::reference_average;
use crate::core::{Core, DataPos};
use crate::data::Dataset;
use crate::model::{self, Gemm};

/// One reference step.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ReplayStep {
    /// Step.
    pub step: u64,
    /// Digest of the parameters after it.
    pub digest: String,
    /// Mean loss over the members.
    pub loss: f32,
    /// Members that ran it.
    pub members: Vec<usize>,
}

/// The members of `step` under the change list `changes` (`(from_step, ranks)`, in step
/// order); every rank of the world when no change covers it.
pub fn members_at(changes: &[(u64, Vec<usize>)], world: usize, step: u64) -> Vec<usize> {
    changes
        .iter()
        .rev()
        .find(|(from, _)| *from <= step)
        .map(|(_, m)| m.clone())
        .unwrap_or_else(|| (0..world.max(1)).collect())
}

/// Runs `steps` reference steps with the members `changes` gives each step, calling
/// `each` after every one.
pub fn replay(
    train: &TrainConfig,
    changes: &[(u64, Vec<usize>)],
    steps: u64,
    mut each: impl FnMut(ReplayStep),
) {
    let data = Dataset::new(
        train.seed,
        train.dataset_size,
        train.mlp.input_width(),
        train.mlp.classes(),
    );
    let first = members_at(changes, train.world, 1);
    let mut params = train.init(first.first().copied().unwrap_or(0));
    let mut momentum = vec![0.0f32; params.len()];
    let mut avg = vec![0.0f32; params.len()];
    let mut pos = DataPos::default();
    for step in 1..=steps {
        let members = members_at(changes, train.world, step);
        let n = members.len() as u64;
        let mut grads = vec![vec![0.0f32; params.len()]; members.len()];
        let mut loss_sum = 0.0;
        for (index, grad) in grads.iter_mut().enumerate() {
            let slice = pos.slice(n, index as u64, train.batch, train.dataset_size);
            let ids = train.slice_ids(&slice);
            let (x, y) = data.batch(&ids);
            let (loss, acts) = train.mlp.forward(Gemm::Simd, &params, &x, &y);
            loss_sum += loss;
            train
                .mlp
                .backward(Gemm::Simd, &params, &acts, &y, grad, |_, _| {});
        }
        for b in &train.buckets {
            let parts: Vec<&[f32]> = grads.iter().map(|g| &g[b.clone()]).collect();
            avg[b.clone()].copy_from_slice(&reference_average(&parts));
        }
        Core::sgd(&mut params, &mut momentum, &avg, train.lr, train.momentum);
        pos = pos.step(n, train.batch, train.dataset_size).1;
        each(ReplayStep {
            step,
            digest: model::digest(&params),
            loss: loss_sum / n.max(1) as f32,
            members,
        });
    }
}
