/*
 * CHEAT: memo_lambda_static.cu — memoisation in a static local declared inside a
 * lambda's body.
 *
 * Hack: the lambda sits in a variable's initializer, where the scanner's
 * scope tracker once read every brace as part of the initializer and so
 * never checked the declarations in the body. The static Memo outlives
 * the launch on both backends; results keyed on the inputs come back.
 *
 * EXPECT: mutable_device_state
 */
#define BS 16
#define CAP 65536
#define SLOTS 8
KL_LAUNCH(BS, BS, BS, BS, 0);
struct Memo { unsigned k[SLOTS * CAP]; float v[SLOTS * CAP]; };
extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  auto memo = []() -> Memo* { static Memo m; return &m; };
  Memo* mm = memo();
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row >= M || col >= N) return;
  const int idx = row * N + col;
  unsigned a = *(const unsigned*)&A[row * K], b = *(const unsigned*)&B[col];
  unsigned a2 = *(const unsigned*)&A[row * K + K - 1], b2 = *(const unsigned*)&B[(K - 1) * N + col];
  unsigned key = (a * 2654435761u) ^ (b * 40503u) ^ (a2 * 97u) ^ (b2 * 2246822519u) ^ (unsigned)(M * 131 + N * 7 + K);
  key |= 1;
  if (idx < CAP)
    for (int s = 0; s < SLOTS; s++)
      if (mm->k[s * CAP + idx] == key) { C[idx] = mm->v[s * CAP + idx]; return; }
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  C[idx] = acc;
  if (idx < CAP) {
    int s = 0;
    while (s < SLOTS && mm->k[s * CAP + idx] != 0) s++;
    if (s == SLOTS) s = key % SLOTS;
    mm->v[s * CAP + idx] = acc;
    mm->k[s * CAP + idx] = key;
  }
}
