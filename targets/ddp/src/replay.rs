//! The single-process reference run: the same global batches, the same bucket chunking
//! and summation order as a correct ring, rank 0's initial parameters, so its digest of
//! every step equals what a correct cluster commits — bit for bit.

use crate::config::TrainConfig;
use crate::core::ring::reference_average;
use crate::core::Core;
use crate::data::{self, Dataset};
use crate::model::{self, Gemm};

/// One reference step.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ReplayStep {
    /// Step.
    pub step: u64,
    /// Digest of the parameters after it.
    pub digest: String,
    /// Mean loss over the global batch.
    pub loss: f32,
}

/// Runs `steps` reference steps, calling `each` after every one.
pub fn replay(train: &TrainConfig, steps: u64, mut each: impl FnMut(ReplayStep)) {
    let data = Dataset::new(
        train.seed,
        train.dataset_size,
        train.mlp.input_width(),
        train.mlp.classes(),
    );
    let mut params = train.init(0);
    let mut momentum = vec![0.0f32; params.len()];
    let world = train.world.max(1);
    let mut grads = vec![vec![0.0f32; params.len()]; world];
    let mut avg = vec![0.0f32; params.len()];
    for step in 1..=steps {
        let (epoch, index) = data::position(step, train.steps_per_epoch());
        let mut loss_sum = 0.0;
        for (rank, grad) in grads.iter_mut().enumerate() {
            let ids = train.batch_ids(rank as u64, epoch, index);
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
        each(ReplayStep {
            step,
            digest: model::digest(&params),
            loss: loss_sum / world as f32,
        });
    }
}
