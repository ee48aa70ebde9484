/*
 * policy/cuda/crossentropy.cu — the head's softmax / cross-entropy,
 * mirroring crossentropy_forward / crossentropy_softmax_backward of
 * policy/model.c:
 *   lse[bt] = log sum exp(logits[bt,:]),  losses[bt] = lse - logits[target]
 *   (0 where target == -1);
 *   dlogits[bt,:] = (softmax(logits[bt,:]) - onehot(target)) * dloss[bt]
 *   (0 where target == -1 or dloss == 0).
 * dloss is per token: 1/count for the mean loss (pl_model_backward), or
 * -dloss_dlogp for GRPO's weighted loss (pl_model_backward_weighted). The
 * host sums the losses (in double, in order, as the CPU does); the softmax
 * is never stored, only lse.
 */
#include "policy/cuda/common.cuh"

/* Grid: BT blocks (one per row); block: a multiple of 32 threads. targets
 * is (BT), -1 where there is no loss (all -1 without targets). */
extern "C" __global__ void
crossentropy_forward_kernel(float *losses /*(BT)*/, float *lse /*(BT)*/,
                            const float *logits /*(BT,V)*/,
                            const int32_t *targets /*(BT)*/, int BT, int V) {
  size_t bt = blockIdx.x;
  if (bt >= (size_t)BT) return;
  const float *z = logits + bt * V;
  float mx = -INFINITY;
  for (int i = threadIdx.x; i < V; i += blockDim.x)
    mx = fmaxf(mx, z[i]);
  mx = block_max(mx);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < V; i += blockDim.x)
    sum += expf(z[i] - mx);
  sum = block_sum(sum);
  if (threadIdx.x == 0) {
    float l = mx + logf(sum);
    lse[bt] = l;
    losses[bt] = targets[bt] >= 0 ? l - z[targets[bt]] : 0.0f;
  }
}

/* One thread per element of dlogits (BT*V threads). */
extern "C" __global__ void crossentropy_softmax_backward_kernel(
    float *dlogits /*(BT,V)*/, const float *dloss /*(BT)*/,
    const float *logits /*(BT,V)*/, const float *lse /*(BT)*/,
    const int32_t *targets /*(BT)*/, int BT, int V) {
  size_t idx = global_index();
  if (idx >= (size_t)BT * V) return;
  size_t bt = idx / V;
  int i = (int)(idx % V), target = targets[bt];
  float dl = dloss[bt];
  if (target < 0 || dl == 0.0f) {
    dlogits[idx] = 0.0f;
    return;
  }
  float d = expf(logits[idx] - lse[bt]) * dl;
  if (i == target) d -= dl;
  dlogits[idx] = d;
}
