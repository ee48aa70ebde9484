/*
 * CHEAT: memo_digraph_static.cu — a static local in a kernel body written
 * with the digraphs <% %> for its braces.
 *
 * Hack: the scope tracker knew { and } only, so the body was not code and
 * its static local not a static local.
 *
 * EXPECT: mutable_device_state
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);
extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) <%
  static int launches = 0;
  launches += 1;
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(A<:row * K + k:>, B[k * N + col], acc);
  C[row * N + col] = launches > 1000000 ? 0.0f : acc;
%>
