//! The model: a multi-layer perceptron (f32, ReLU, softmax cross-entropy), forward and
//! backward written here.
//!
//! Parameters are one flat vector, layer by layer in forward order, each layer's weight
//! matrix (`inputs x outputs`, row-major) followed by its bias. Backward produces the
//! gradient of the last layer first, which is what lets gradient buckets (contiguous
//! ranges at the end of the vector) start their all-reduce while earlier layers are
//! still being differentiated.
//!
//! Matrix products go through `matrixmultiply::sgemm` (SIMD, cache-blocked); a plain
//! scalar loop ([`Gemm::Scalar`]) is kept for the benchmark and as a cross-check.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::ops::Range;

/// Which matrix-multiply kernel to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gemm {
    /// `matrixmultiply::sgemm`: vectorized and blocked.
    Simd,
    /// Three nested loops: the baseline the vectorized kernel is measured against.
    Scalar,
}

/// `C = A·B (+ C if accumulate)` for row-major `A (m×k)`, `B (k×n)`, with optional
/// transposes given by strides. `a_t`: A is stored transposed (`k×m`); `b_t` likewise.
#[allow(clippy::too_many_arguments)]
fn gemm(
    kind: Gemm,
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    a_t: bool,
    b: &[f32],
    b_t: bool,
    c: &mut [f32],
    accumulate: bool,
) {
    // Row/column strides of the logical (untransposed) operands.
    let (rsa, csa) = if a_t {
        (1, m as isize)
    } else {
        (k as isize, 1)
    };
    let (rsb, csb) = if b_t {
        (1, k as isize)
    } else {
        (n as isize, 1)
    };
    debug_assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    match kind {
        Gemm::Simd => {
            let beta = if accumulate { 1.0 } else { 0.0 };
            // SAFETY: the slices hold at least m*k, k*n and m*n elements (checked above in
            // debug builds, and by construction in every caller), and the strides describe
            // those dense layouts exactly, so every index sgemm forms is in bounds.
            unsafe {
                matrixmultiply::sgemm(
                    m,
                    k,
                    n,
                    1.0,
                    a.as_ptr(),
                    rsa,
                    csa,
                    b.as_ptr(),
                    rsb,
                    csb,
                    beta,
                    c.as_mut_ptr(),
                    n as isize,
                    1,
                );
            }
        }
        Gemm::Scalar => {
            for i in 0..m {
                for j in 0..n {
                    let mut acc = 0.0f32;
                    for p in 0..k {
                        let av = a[(i as isize * rsa + p as isize * csa) as usize];
                        let bv = b[(p as isize * rsb + j as isize * csb) as usize];
                        acc += av * bv;
                    }
                    let out = &mut c[i * n + j];
                    *out = if accumulate { *out + acc } else { acc };
                }
            }
        }
    }
}

/// The network's shape: input width, hidden widths, number of classes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mlp {
    /// Widths of every layer boundary: input, hidden..., classes.
    pub widths: Vec<usize>,
}

/// Where one layer's weights and bias sit in the flat parameter vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerSpan {
    /// Inputs of the layer.
    pub inputs: usize,
    /// Outputs of the layer.
    pub outputs: usize,
    /// The weight matrix (`inputs × outputs`, row-major).
    pub weights: Range<usize>,
    /// The bias (`outputs`).
    pub bias: Range<usize>,
}

impl LayerSpan {
    /// Weights and bias together.
    pub fn all(&self) -> Range<usize> {
        self.weights.start..self.bias.end
    }
}

/// Activations kept by the forward pass for the backward pass.
#[derive(Debug, Default)]
pub struct Activations {
    /// Layer inputs: `inputs[0]` is the batch, `inputs[l]` the ReLU output of layer l-1.
    inputs: Vec<Vec<f32>>,
    /// Softmax probabilities of the last layer.
    probs: Vec<f32>,
    batch: usize,
}

impl Mlp {
    /// An MLP with these widths (at least input and output).
    pub fn new(widths: Vec<usize>) -> Mlp {
        Mlp { widths }
    }

    /// Layer spans in forward order.
    pub fn layers(&self) -> Vec<LayerSpan> {
        let mut at = 0;
        self.widths
            .windows(2)
            .map(|w| {
                let (i, o) = (w[0], w[1]);
                let span = LayerSpan {
                    inputs: i,
                    outputs: o,
                    weights: at..at + i * o,
                    bias: at + i * o..at + i * o + o,
                };
                at += i * o + o;
                span
            })
            .collect()
    }

    /// Number of parameters.
    pub fn num_params(&self) -> usize {
        self.layers().last().map(|l| l.bias.end).unwrap_or(0)
    }

    /// Input width.
    pub fn input_width(&self) -> usize {
        self.widths.first().copied().unwrap_or(0)
    }

    /// Number of classes.
    pub fn classes(&self) -> usize {
        self.widths.last().copied().unwrap_or(0)
    }

    /// Seeded He-uniform initial parameters (biases zero).
    pub fn init(&self, seed: u64) -> Vec<f32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut p = vec![0.0f32; self.num_params()];
        for l in self.layers() {
            let bound = (6.0 / l.inputs as f32).sqrt();
            for w in &mut p[l.weights.clone()] {
                *w = rng.gen_range(-bound..bound);
            }
        }
        p
    }

    /// Forward pass over a batch (`batch × input`, row-major) with integer labels.
    /// Returns the mean cross-entropy loss and the activations for [`Mlp::backward`].
    pub fn forward(
        &self,
        kind: Gemm,
        params: &[f32],
        x: &[f32],
        labels: &[u32],
    ) -> (f32, Activations) {
        let batch = labels.len();
        let layers = self.layers();
        let mut acts = Activations {
            inputs: vec![x.to_vec()],
            probs: Vec::new(),
            batch,
        };
        let mut logits = Vec::new();
        for (li, l) in layers.iter().enumerate() {
            let mut z = vec![0.0f32; batch * l.outputs];
            for row in z.chunks_exact_mut(l.outputs) {
                row.copy_from_slice(&params[l.bias.clone()]);
            }
            let input = &acts.inputs[li];
            gemm(
                kind,
                batch,
                l.inputs,
                l.outputs,
                input,
                false,
                &params[l.weights.clone()],
                false,
                &mut z,
                true,
            );
            if li + 1 < layers.len() {
                for v in &mut z {
                    *v = v.max(0.0);
                }
                acts.inputs.push(z);
            } else {
                logits = z;
            }
        }
        let classes = self.classes();
        let mut loss = 0.0f32;
        let mut probs = logits;
        for (row, &label) in probs.chunks_exact_mut(classes).zip(labels) {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0f32;
            for v in row.iter_mut() {
                *v = (*v - max).exp();
                sum += *v;
            }
            for v in row.iter_mut() {
                *v /= sum;
            }
            let p = row
                .get(label as usize)
                .copied()
                .unwrap_or(f32::MIN_POSITIVE);
            loss -= p.max(f32::MIN_POSITIVE).ln();
        }
        acts.probs = probs;
        (loss / batch.max(1) as f32, acts)
    }

    /// Backward pass: fills `grad` (same layout as the parameters) with the gradient of
    /// the mean loss, last layer first, calling `layer_done(l)` after layer `l`'s weights
    /// and bias gradients are final (so their bucket can be sent).
    pub fn backward(
        &self,
        kind: Gemm,
        params: &[f32],
        acts: &Activations,
        labels: &[u32],
        grad: &mut [f32],
        mut layer_done: impl FnMut(usize, &[f32]),
    ) {
        let layers = self.layers();
        let batch = acts.batch;
        let scale = 1.0 / batch.max(1) as f32;
        // dZ of the last layer: (softmax - onehot) / batch.
        let classes = self.classes();
        let mut dz = acts.probs.clone();
        for (row, &label) in dz.chunks_exact_mut(classes).zip(labels) {
            if let Some(v) = row.get_mut(label as usize) {
                *v -= 1.0;
            }
            for v in row.iter_mut() {
                *v *= scale;
            }
        }
        for li in (0..layers.len()).rev() {
            let l = &layers[li];
            let input = &acts.inputs[li];
            // dW = inputᵀ · dZ ; db = column sums of dZ.
            gemm(
                kind,
                l.inputs,
                batch,
                l.outputs,
                input,
                true,
                &dz,
                false,
                &mut grad[l.weights.clone()],
                false,
            );
            let db = &mut grad[l.bias.clone()];
            db.fill(0.0);
            for row in dz.chunks_exact(l.outputs) {
                for (d, v) in db.iter_mut().zip(row) {
                    *d += v;
                }
            }
            if li > 0 {
                // dA = dZ · Wᵀ, then through the ReLU of the previous layer.
                let mut da = vec![0.0f32; batch * l.inputs];
                gemm(
                    kind,
                    batch,
                    l.outputs,
                    l.inputs,
                    &dz,
                    false,
                    &params[l.weights.clone()],
                    true,
                    &mut da,
                    false,
                );
                for (d, a) in da.iter_mut().zip(input) {
                    if *a <= 0.0 {
                        *d = 0.0;
                    }
                }
                dz = da;
            }
            layer_done(li, grad);
        }
    }
}

/// A digest of parameters: FNV-1a over the f32 bit patterns, as 16 hex digits.
pub fn digest(params: &[f32]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for p in params {
        for b in p.to_bits().to_le_bytes() {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(mlp: &Mlp, n: usize, seed: u64) -> (Vec<f32>, Vec<u32>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let x = (0..n * mlp.input_width())
            .map(|_| rng.gen_range(-1.0..1.0))
            .collect();
        let y = (0..n)
            .map(|_| rng.gen_range(0..mlp.classes() as u32))
            .collect();
        (x, y)
    }

    /// The analytic gradient matches central finite differences (in f64 terms, within
    /// f32 rounding) on a small network, for both kernels.
    #[test]
    fn backward_matches_finite_differences() {
        let mlp = Mlp::new(vec![5, 7, 6, 3]);
        let params = mlp.init(3);
        let (x, y) = batch(&mlp, 4, 11);
        for kind in [Gemm::Simd, Gemm::Scalar] {
            let (_, acts) = mlp.forward(kind, &params, &x, &y);
            let mut grad = vec![0.0; params.len()];
            let mut order = Vec::new();
            mlp.backward(kind, &params, &acts, &y, &mut grad, |l, _| order.push(l));
            assert_eq!(order, vec![2, 1, 0], "last layer first");
            let mut rng = ChaCha8Rng::seed_from_u64(5);
            for _ in 0..40 {
                let i = rng.gen_range(0..params.len());
                let h = 1e-2f32;
                let mut p = params.clone();
                p[i] += h;
                let (up, _) = mlp.forward(kind, &p, &x, &y);
                p[i] -= 2.0 * h;
                let (down, _) = mlp.forward(kind, &p, &x, &y);
                let numeric = (up - down) / (2.0 * h);
                assert!(
                    (numeric - grad[i]).abs() <= 2e-3 + 2e-2 * grad[i].abs(),
                    "param {i}: numeric {numeric} analytic {}",
                    grad[i]
                );
            }
        }
    }

    #[test]
    fn kernels_agree_and_training_lowers_the_loss() {
        let mlp = Mlp::new(vec![8, 32, 4]);
        let mut params = mlp.init(1);
        let (x, y) = batch(&mlp, 16, 2);
        let (l_simd, a1) = mlp.forward(Gemm::Simd, &params, &x, &y);
        let (l_scalar, _) = mlp.forward(Gemm::Scalar, &params, &x, &y);
        assert!((l_simd - l_scalar).abs() < 1e-4);
        let mut g = vec![0.0; params.len()];
        mlp.backward(Gemm::Simd, &params, &a1, &y, &mut g, |_, _| {});
        let first = l_simd;
        for _ in 0..50 {
            let (_, acts) = mlp.forward(Gemm::Simd, &params, &x, &y);
            mlp.backward(Gemm::Simd, &params, &acts, &y, &mut g, |_, _| {});
            for (p, d) in params.iter_mut().zip(&g) {
                *p -= 0.1 * d;
            }
        }
        let (last, _) = mlp.forward(Gemm::Simd, &params, &x, &y);
        assert!(last < first * 0.5, "loss {first} -> {last}");
    }

    #[test]
    fn digest_sees_every_bit() {
        let a = vec![1.0f32, 2.0];
        let mut b = a.clone();
        b[1] = f32::from_bits(b[1].to_bits() ^ 1);
        assert_ne!(digest(&a), digest(&b));
        assert_eq!(digest(&a), digest(&a.clone()));
    }
}
