/*
 * kernels/kernels.h — the one public header of the kernels module.
 *
 * kernels/ owns everything about a candidate kernel that does not know about
 * policies or rewards: the candidate contract (kernels/abi.h), source checks,
 * NVRTC compilation with an on-disk cache, the two execution backends (the CPU
 * emulator `cpu-emu` in kernels/emu/; the GPU backend in kernels/gpu*.c,
 * driver API, CUPTI and cuBLAS loaded with dlopen), the float64 reference,
 * the correctness, anti-cheat and timing protocol that `kernlab eval`
 * reports (kernels/check.c), and the timing statistics (kernels/stats.c).
 *
 * Prefix: kl_. Errors are values: functions return a KL_* status and write a
 * one-line reason into a caller-supplied buffer (`why`, `whylen`).
 */
#ifndef KERNELS_KERNELS_H
#define KERNELS_KERNELS_H

#include <stdio.h>
#include <sys/stat.h>
#include <stddef.h>
#include <stdint.h>

/* Status codes. KL_EINPUT and KL_EENV match the CLI exit codes 2 and 3. */
enum {
  KL_OK = 0,
  KL_EINPUT = 2,   /* unreadable or invalid input file */
  KL_EENV = 3,     /* environment problem: missing NVRTC, compiler, device */
  KL_ECOMPILE = 4, /* the candidate did not compile */
  KL_ERUN = 5,     /* the candidate could not be run (geometry, emulator) */
  KL_ETIMEOUT = 6, /* a sandboxed step overran its deadline or was killed */
  KL_EOOM = 7,     /* a sandboxed step ran out of its memory limit */
};

/* ---- sha256 (kernels/sha256.c) ------------------------------------------ */

typedef struct kl_sha256_ctx {
  uint32_t state[8];
  uint64_t bytes;
  uint8_t block[64];
  size_t fill;
} kl_sha256_ctx;

void kl_sha256_init(kl_sha256_ctx *ctx);
void kl_sha256_update(kl_sha256_ctx *ctx, const void *data, size_t len);
void kl_sha256_final(kl_sha256_ctx *ctx, uint8_t out[32]);
/* One-shot digest of data as 64 lowercase hex characters plus NUL. */
void kl_sha256_hex(const void *data, size_t len, char out[65]);

/* ---- output files (kernels/outfile.c) ------------------------------------
 *
 * Every file the lab writes whole (a checkpoint, a tokenizer, a report, an
 * export) is written beside its name and renamed into place when complete:
 * a reader never sees a partial file, and a failure or a kill leaves the
 * earlier file (or none). The temporary name is PATH.tmp.PID, so the lab's
 * interrupt handler, which may not allocate, can know it in advance. */

typedef struct kl_outfile {
  FILE *f; /* write here between open and commit */
  char *path, *tmp;
} kl_outfile;

/* PATH.tmp.PID for this process in buf (cap bytes): 0, or -1 when it does
 * not fit. */
int kl_outfile_tmpname(const char *path, char *buf, size_t cap);
/* Creates the temporary file (mode 0666 less the umask): 0, or -1 with why
 * naming path, the temporary file and the error. */
int kl_outfile_open(kl_outfile *o, const char *path, char *why, size_t len);
/* Flushes, closes and renames into place; durable also fsyncs the file
 * before the rename and its folder after (a checkpoint that must survive a
 * power cut). 0, or -1 with why (the temporary file removed). Either way o
 * is released. */
int kl_outfile_commit(kl_outfile *o, int durable, char *why, size_t len);
/* Closes and removes the temporary file; the earlier file is untouched. */
void kl_outfile_abort(kl_outfile *o);
/* Opens path for reading when it is a regular file, without ever waiting:
 * a FIFO (or a device) put at path between a check and the open would
 * block a plain open for ever, so the open is non-blocking and the check
 * is fstat on what was opened. Returns the stream (blocking again), or
 * NULL with errno: the open's, or EINVAL for "not a regular file" (and
 * EISDIR for a folder). st (may be NULL) gets the file's stat. */
FILE *kl_fopen_regular(const char *path, struct stat *st);
/* kl_fopen_regular's errno in words: "not a regular file" for EINVAL (and
 * EISDIR, naming the folder), strerror for the rest. */
const char *kl_fopen_error(int err);
/* Why writing f failed, after flushing it: fflush's errno, or for an
 * earlier buffered write whose errno is gone, ENOSPC when f is a file on a
 * full file system, else EIO; 0 when every write arrived. */
int kl_stream_errno(FILE *f);

/* Removes the temporary files a killed process left beside path: names
 * PATH.tmp.PID whose PID is no running process (a live one, perhaps a
 * writer of the same file, is left alone). Returns how many it removed. */
int kl_outfile_sweep(const char *path);

/* ---- the candidate contract (kernels/abi.h) ------------------------------ */

/* Launch geometry as declared by KL_LAUNCH in the source; same layout as
 * kl_launch_geometry in abi.h (five ints). */
typedef struct kl_launch {
  int block_x, block_y, tile_rows, tile_cols, dyn_smem_bytes;
} kl_launch;

/* The text of kernels/abi.h, embedded at build time; NUL-terminated. */
extern const char kl_abi_header[];

/* C++ text appended to every candidate before compiling (NVRTC and the
 * emulator): a static_assert that matmul has the contract's signature. Its
 * failure message starts with "kl_contract:". */
extern const char kl_contract_check[];

/* Checks a launch geometry against the contract (1..1024 threads, positive
 * tiles, 0..227 KiB dynamic shared memory). Returns KL_OK or KL_EINPUT. */
int kl_launch_validate(const kl_launch *g, char *why, size_t whylen);

/* ---- source checks (kernels/source.c) ------------------------------------ */

#define KL_MAX_SOURCE_BYTES (256 * 1024)
/* What a compile may hand back. Every cubin goes to the artifact cache, and
 * an honest one is about 8 KB: one initialised __device__ table of 40M
 * floats made NVRTC store 160 MB per edit of the source (the second sandbox
 * review). A longer log keeps its first and last halves. */
#define KL_MAX_CUBIN_BYTES (4 << 20)
#define KL_MAX_LOG_BYTES (256 << 10)

/* The headers a candidate may #include, each by its literal name: the one
 * list that source validation refuses against, the scanner flags against
 * and messages name. "A, B, C" as it is printed. */
#define KL_INCLUDE_ALLOWLIST                                                   \
  "cuda_fp16.h, cuda_bf16.h, cuda_pipeline.h, mma.h, cooperative_groups.h, "   \
  "cooperative_groups/reduce.h"
/* 1 if the len bytes at name are one of KL_INCLUDE_ALLOWLIST's names
 * exactly (no path, no blanks), else 0. */
int kl_include_allowed(const char *name, size_t len);

/* Reads a candidate file. Rejects: missing file, directory, empty file,
 * files over KL_MAX_SOURCE_BYTES. On KL_OK *src is a malloc'd NUL-terminated
 * copy owned by the caller. Returns KL_OK or KL_EINPUT. */
int kl_source_load(const char *path, char **src, size_t *len, char *why,
                   size_t whylen);

/* Checks the text before anything compiles it: NUL bytes, invalid UTF-8,
 * #include outside the allowlist (any spelling: digraphs, line splices,
 * macro-expanded names), no `matmul`, no `KL_LAUNCH`, and cooperative
 * groups or libcu++ beyond the block and tile level both backends run
 * (grid, cluster and coalesced groups, memcpy_async, cuda:: ...; why
 * names it and the reason). Returns KL_OK or KL_EINPUT. */
int kl_source_validate(const char *src, size_t len, char *why, size_t whylen);
/* src (n bytes) with its line splices (backslash-newline) joined, as the
 * preprocessor's phase 2 does, each removed newline put back after the
 * logical line so that line numbers stay; malloc'd, NUL-terminated, its
 * length in *len; NULL when out of memory. Whatever rewrites a candidate
 * for one compiler reads this text, so that it sees the comments and
 * directives both compilers see. */
char *kl_source_join_splices(const char *src, size_t n, size_t *len);

/* ---- NVRTC (kernels/nvrtc.c, kernels/ptxas.c, kernels/elf.c) --------------
 */

/* Resource use as reported by ptxas -v (sm_90). -1 where not reported. */
typedef struct kl_resources {
  int regs;
  int spill_stores, spill_loads; /* bytes */
  int smem_bytes;                /* static shared memory */
  int stack_bytes;               /* stack frame */
  int barriers;
} kl_resources;

typedef struct kl_compiled {
  uint8_t *cubin; /* sm_90 cubin (ELF), owned; for a virtual architecture
                     (compute_90: show --ptx) the PTX text, no NUL */
  size_t cubin_size;
  char *log;         /* full NVRTC program log incl. ptxas -v, owned */
  kl_resources res;  /* parsed from log (entry `matmul`) */
  kl_launch launch;  /* read from the cubin's kl_launch symbol */
  int has_launch;    /* 1 if the symbol was found */
  double compile_ms; /* wall time of this call (cache hit: lookup time) */
  int cache_hit;     /* 1 if served from the on-disk cache */
  char key[65];      /* sha256(source + options + toolkit version) */
  /* the sandbox it compiled in, as kl_result.confinement; 0 in-process or
   * from the cache. Set on failures too (compile error, timeout, oom). */
  int confinement;
} kl_compiled;

/* Loads NVRTC with dlopen (once). Returns KL_OK or KL_EENV with a reason. */
int kl_nvrtc_load(char *why, size_t whylen);
/* "13.0" etc.; "unknown" before a successful kl_nvrtc_load. */
const char *kl_nvrtc_version(void);

/* Compiles src with NVRTC for `arch` ("sm_90"; "sm_90a" when the source uses
 * wgmma) with --ptxas-options=-v, pre-including abi.h. Uses the disk cache
 * unless use_cache is 0. Returns KL_OK, KL_ECOMPILE (why holds the first
 * error lines of the log; out->log the whole log) or KL_EENV. The caller
 * frees out with kl_compiled_free in every case. */
int kl_nvrtc_compile(const char *src, size_t len, const char *arch,
                     int use_cache, kl_compiled *out, char *why, size_t whylen);
void kl_compiled_free(kl_compiled *c);

/* The cache half of kl_nvrtc_compile, for a supervisor whose compiles run
 * in a sandboxed worker that may not write files: kl_nvrtc_cached returns 1
 * and a complete out on a hit (0 on a miss, out->key set when NVRTC could be
 * loaded); kl_nvrtc_store writes a successful compile under c->key. */
int kl_nvrtc_cached(const char *src, size_t len, const char *arch,
                    kl_compiled *out);
void kl_nvrtc_store(const kl_compiled *c);
/* Fills res and launch from c->log and c->cubin (both untrusted: parsing is
 * bounds-checked). */
void kl_compiled_finish(kl_compiled *c);

/* Parses `ptxas info` lines for the entry `matmul`. Fields not found are -1.
 * Returns 1 if at least the register count was found. */
int kl_ptxas_parse(const char *log, kl_resources *out);

/* Finds symbol `name` in an ELF64 image (a cubin) and points *data at its
 * initialised bytes. Returns KL_OK, or KL_EINPUT with a reason for malformed
 * images or a missing symbol. Never reads outside [elf, elf + size). */
int kl_elf_symbol(const void *elf, size_t size, const char *name,
                  const void **data, size_t *data_len, char *why,
                  size_t whylen);

/* Checks that a shared object (the emulator's host build of a candidate)
 * runs none of its own code while it loads or unloads: no constructors or
 * dynamic initialisers (.init_array, .preinit_array, DT_INIT), no ifunc
 * resolvers, no destructors (.fini_array, DT_FINI, DT_FINI_ARRAY). Returns
 * KL_OK, or KL_EINPUT with what it found in why (also for a malformed image).
 * Never reads outside [elf, elf + size). */
int kl_elf_load_time_code(const void *elf, size_t size, char *why,
                          size_t whylen);

/* Checks every symbol the shared object imports (an undefined .dynsym
 * entry, weak or not) with allowed(name). Returns KL_OK with *refused the
 * first name allowed refuses (NUL-terminated, inside the image) or NULL;
 * KL_EINPUT with what is malformed in why. Never reads outside
 * [elf, elf + size). */
int kl_elf_imports_allowed(const void *elf, size_t size,
                           int (*allowed)(const char *name),
                           const char **refused, char *why, size_t whylen);

/* ---- on-disk artifact cache (kernels/cache.c) -----------------------------
 */

/* Cache folder: $KERNLAB_CACHE, else $XDG_CACHE_HOME/kernlab, else
 * ~/.cache/kernlab, else /tmp/kernlab-cache-<uid>. Created on first use. */
const char *kl_cache_dir(void);
/* Reads entry key+suffix. Returns 1 and a malloc'd buffer on a hit, 0 on a
 * miss (including unreadable or corrupt entries). */
int kl_cache_get(const char *key, const char *suffix, uint8_t **data,
                 size_t *len);
/* Writes atomically (temp file + rename). Returns 1 on success. A failure
 * only costs the next compile. */
int kl_cache_put(const char *key, const char *suffix, const void *data,
                 size_t len);
/* Path of entry key+suffix in the cache folder (for artifacts that are
 * files, such as the emulator's shared objects). */
void kl_cache_path(const char *key, const char *suffix, char *path,
                   size_t pathlen);

/* ---- the CPU emulator (kernels/emu/) --------------------------------------
 */

typedef struct kl_emu_module kl_emu_module;

/* Compiles src with the host C++ compiler and the CUDA shim into a shared
 * object (cached by sha256 of source, shim and compiler), loads it and reads
 * kl_launch with dlsym. Returns KL_OK, KL_ECOMPILE or KL_EENV. */
int kl_emu_build(const char *src, size_t len, kl_emu_module **out,
                 double *build_ms, int *cache_hit, char *why, size_t whylen);
const kl_launch *kl_emu_geometry(const kl_emu_module *m);

/* The two halves of kl_emu_build, for a supervisor that compiles in the lab
 * and loads in a sandboxed worker. kl_emu_compile writes the cached .so's
 * path into so_path (compiling it first on a miss). kl_emu_load dlopens it
 * and reads kl_launch: the candidate's static initialisers would run here,
 * so call it only inside the sandbox; once per file and process (a second
 * load of a loaded file is refused, KL_EENV). opened (may be NULL) is
 * called with ctx as soon as dlopen returns, before any of the module's
 * code is called or the module closed again (a sandbox tightens its filter
 * there). needs_fibers: kl_emu_needs_fibers(source). */
int kl_emu_compile(const char *src, size_t len, char *so_path, size_t pathlen,
                   double *build_ms, int *cache_hit, char *why, size_t whylen);
int kl_emu_load(const char *so_path, int needs_fibers, void (*opened)(void *),
                void *ctx, kl_emu_module **out, char *why, size_t whylen);
int kl_emu_needs_fibers(const char *src);
/* kl_emu_needs_fibers's bits: the source names a barrier or warp op (its
 * threads run as fibers); it names atomics, warp ops or fences, by which
 * threads may exchange shared memory between barriers (the reversed check
 * run then does not isolate block 0's threads: emu_run.c) */
#define KL_EMU_FIBERS 1
#define KL_EMU_NO_ISOLATION 2
/* Prefix put before the host compiler's argv (e.g. the sandbox's
 * host-compile worker, which sets limits and then execs the compiler).
 * NULL-terminated; NULL for none. The array must outlive the calls. */
void kl_emu_set_launcher(const char *const *prefix);
/* The host compile's wall deadline in seconds (default 60; <= 0 keeps
 * it): past it kl_emu_compile kills the compiler and returns KL_ETIMEOUT.
 * A compiler that runs out of memory gives KL_EOOM. */
void kl_emu_set_compile_deadline(double seconds);
/* Kills every host compile in flight (each its own process group, out of
 * a terminal's Ctrl-C's reach). Async-signal-safe: for a command's signal
 * handler that stops the lab at once, so no compiler outlives it. */
void kl_emu_kill_compiles(void);
/* Starts the emulator's OS threads now (they are reused by every launch).
 * Returns how many exist. A sandboxed runner calls it before loading the
 * candidate, then forbids creating threads. */
int kl_emu_pool_start(int n);
/* Maps and touches the fiber stacks of the first `workers` worker slots
 * (blocks of up to 1024 threads) ahead of the first launch. */
void kl_emu_prewarm(int workers);
/* Runs the grid on `threads` OS threads (0 = all cores). Returns KL_OK or
 * KL_ERUN (deadlocked barrier, geometry). */
int kl_emu_run(kl_emu_module *m, const float *A, const float *B, float *C,
               int M, int N, int K, int threads, char *why, size_t whylen);
/* reverse 1: the following kl_emu_run calls resume each block's threads
 * from the last one down instead of from thread 0 up (a thread runs until
 * its next barrier, so each order lets a thread see only what the threads
 * before it wrote), and two blocks drawn from seed run isolated: their
 * threads see between barriers only their own writes and a fixed half of
 * the others' (emu_run.c, iso_begin). A kernel with a race, such as a
 * missing barrier, gives different results in the two orders; the
 * runner's second run of shape 0 (kl_run_job.second_run) uses it. */
void kl_emu_set_reverse(kl_emu_module *m, int reverse, uint64_t seed);
void kl_emu_free(kl_emu_module *m);

/* ---- evaluation: correctness and timing (kernels/check.c) --------------- */

typedef struct kl_shape {
  int M, N, K;
} kl_shape;

/* fp32 tolerances, stated once: a result passes a shape when every element
 * is written and finite, ||C - R||_F / ||R||_F <= KL_TOL_REL, and every
 * |C_ij - R_ij| <= KL_TOL_ELEM * sum_k |A_ik| |B_kj| (the scale of the
 * rounding error a float32 dot product can make). A half, bfloat16 or tf32
 * product misses KL_TOL_REL by two orders of magnitude. */
#define KL_TOL_REL 1e-5
#define KL_TOL_ELEM 1e-4

#define KL_MAX_SHAPES 16

typedef struct kl_shape_check {
  kl_shape shape;
  /* Both over the finite elements, and +inf when the kernel wrote a NaN or
   * inf (C - R is not finite) or no element is finite. */
  double rel_err;     /* ||C - R||_F / ||R||_F */
  double max_abs_err; /* max |C_ij - R_ij| */
  long unwritten;     /* elements still holding the poison NaN */
  long nonfinite;     /* other NaN/inf elements */
  long over_tol;      /* elements outside the element-wise bound */
  int pass;
} kl_shape_check;

typedef struct kl_eval_options {
  const char *backend;            /* "auto", "cpu-emu" or "gpu" */
  kl_shape shapes[KL_MAX_SHAPES]; /* shapes[0] is the target (timed) shape */
  int n_shapes;                   /* 0: the default target 256x256x256 */
  uint64_t seed;                  /* 0: the lab picks one and reports it */
  int threads;                    /* OS threads for cpu-emu; 0 = all cores */
  double time_budget_ms; /* timing stops after this much (and >= 5 runs) */
  int max_samples;
  double run_deadline_s; /* wall deadline for one candidate's runs */
  /* Plausibility: the baseline's time at the target (the lab sets it once
   * measured) and the largest believable speedup over it; above it the
   * candidate gets implausible_speed. */
  double baseline_us;
  double max_speedup;
  /* Where compiles and runs happen. NULL: NVRTC in this process and runs
   * in a forked child of it (tests, benches). The lab passes the sandbox's
   * workers (kernels/ does not depend on sandbox/). */
  const struct kl_executor *exec;
} kl_eval_options;

#define KL_MAX_TIMING_SAMPLES 200

/* One run of a candidate on cpu-emu: what a run worker is asked to do.
 * Plain data, so it can cross a pipe. */
typedef struct kl_run_job {
  char so_path[512]; /* the emulator's shared object (kl_emu_compile) */
  int needs_fibers;
  int n_shapes; /* checked shapes; 0 with timing_only */
  kl_shape shapes[KL_MAX_SHAPES];
  kl_shape timed_shape; /* timed after the checks when timed */
  uint64_t seed;        /* inputs of check s: streams 2s and 2s+1 */
  int threads;          /* OS threads, resolved (>= 1) */
  int timed;
  int max_samples;
  double time_budget_ms;
  double deadline_s; /* wall deadline for the whole job (the supervisor's) */
  int second_run;    /* run shapes[0] again on a fresh output (determinism;
                        on cpu-emu with each block's threads in reverse order,
                        kl_emu_set_reverse) */
  /* cpu-emu: the timed launches are driven from outside the runner's
   * process (kl_pace): the driver writes fresh inputs it drew from a seed
   * the runner never sees, starts each launch, times it on its own clock
   * and verifies it before the next. Unpaced (kl_run_forked, in-process
   * runs) the runner drives its own launches the same way, and the GPU
   * runner does as much on the device (kernels/gpu_run.c): every timed
   * launch has inputs of its own and is checked on them. */
  int paced;
} kl_run_job;

#define KL_OUT_SLOTS (KL_MAX_SHAPES + 2) /* kl_run_output_layout's offs */
#define KL_CANARY_FLOATS 1024      /* guard band on each side of every buffer */
#define KL_CANARY_BITS 0x7fb1c0deu /* each float of a band, as bits */
/* Fills one band (KL_CANARY_FLOATS floats at band) with the canary; and
 * whether one still holds it. The CPU runner's buffers and the sandbox's
 * matmul memfd use them (the GPU runner writes KL_CANARY_BITS itself). */
void kl_canary_fill(float *band);
int kl_canary_intact(const float *band);

/* What a GPU run adds to its report (kernels/gpu.c); all zero on cpu-emu.
 * Output slots are indexed as kl_run_output_layout's offs. */
typedef struct kl_gpu_stats {
  int valid;       /* 1 when a GPU run filled this */
  char status[48]; /* "cuda:ILLEGAL_ADDRESS" etc. after a CUDA error */
  char device[96]; /* cuDeviceGetName */
  int cc_major, cc_minor, sm_count, l2_bytes, driver_version;
  /* cuFuncGetAttribute on `matmul`, and the occupancy API */
  int regs, static_smem, local_bytes, const_bytes, max_threads;
  int dyn_smem_opt_in; /* 1 if MAX_DYNAMIC_SHARED_SIZE_BYTES was raised */
  int blocks_per_sm;   /* cuOccupancyMaxActiveBlocksPerMultiprocessor */
  double occupancy;    /* resident warps / the SM's maximum, 0..1 */
  /* Timing (rep->sample_us holds the kept samples of `timer`). */
  char timer[16];      /* "cupti" or "events" (CUPTI unavailable) */
  char timer_note[96]; /* why CUPTI was not used, if it was not */
  double median_us, min_us, p20_us, p80_us, cv, rel_noise;
  int stop;                               /* KL_STATS_STOP_* */
  int n_throttled, n_invalid;             /* samples dropped, by reason */
  double event_median_us, host_median_us; /* the two cross-checks */
  int disagreements;      /* samples where CUPTI and events differ > 5% */
  int kernels_per_launch; /* CUPTI kernel records in the last sample */
  double flush_bytes;     /* L2 flush buffer (>= 2x L2) */
  /* Large shapes are checked in the worker against cuBLAS DGEMM on float64
   * copies, in fresh allocations, after the candidate ran (see
   * kl_gpu_device_ref). dev_checked[i] says slot i's check is here. */
  int dev_checked[KL_OUT_SLOTS];
  kl_shape_check dev_checks[KL_OUT_SLOTS];
} kl_gpu_stats;

/* What the run reports back. Outputs travel separately: one C per checked
 * shape, then the rerun of the first (kl_run_output_layout). */
typedef struct kl_run_report {
  int done;         /* every run finished */
  int failed;       /* a launch failed: why says how */
  int deadlock;     /* ... because of a barrier deadlock */
  kl_launch launch; /* as the loaded module declares it */
  int has_launch;
  char why[512];
  int samples;
  double sample_us[KL_MAX_TIMING_SAMPLES];
  int timed_launches; /* behind the samples (cpu-emu: batches, kl_pace); 0
                         when each sample is one launch */
  double launch_us;   /* cpu-emu: wall time inside every launch, untimed too */
  /* What the runner saw around the launches (dynamic kl_flags bits):
   * canary_overwritten, input_mutated. */
  uint64_t flags;
  char flag_detail[160];
  kl_gpu_stats gpu; /* GPU runs only */
  /* Paced jobs: the driver's own clock around each timed launch
   * (kl_pace_merge), what the score uses; sample_us above is then only
   * the runner's claim, held to these. Set by the driver, never taken
   * from the runner's process. */
  int paced_samples;
  double paced_us[KL_MAX_TIMING_SAMPLES];
} kl_run_report;

/* Offsets (in floats) of each output in the outputs buffer; returns the
 * total. Layout: one C per checked shape, then the second run of shape 0
 * (if second_run). offs has KL_OUT_SLOTS entries: offs[s] for check s,
 * offs[n_shapes] the second run, offs[n_shapes + 1] the end. Timed
 * launches send no output back: each is checked where its inputs were
 * drawn (kl_verify_launch). */
size_t kl_run_output_layout(const kl_run_job *job, size_t *offs);

/* A rerun whose inputs do not repeat (kernels/check.c). The second run
 * of shape 0 (second_run, on both backends) gets its check's inputs with
 * every row of A and every column of B scaled by its own power of two,
 * 2^-3 .. 2^3, drawn from (seed, launch_no). Powers of two scale exactly,
 * so C' = Dr C Dc and kl_scaled_output gives back the bits the check's
 * own inputs would have: the comparison of the two runs is unchanged,
 * while a memo of the first run's output, kept anywhere, replays the
 * wrong scales. */
typedef struct kl_scaled {
  kl_shape sh;
  float *A0, *B0;       /* the check's own inputs (copies) */
  signed char *er, *ec; /* the last launch's exponents: rows, columns */
} kl_scaled;
#define KL_SCALED_RERUN 0x5ec0dull /* launch_no of the reversed rerun */

/* Copies A (M x K) and B (K x N); exponents 0. 0, or -1 out of memory. */
int kl_scaled_init(kl_scaled *ss, const float *A, const float *B, kl_shape sh);
void kl_scaled_free(kl_scaled *ss);
/* Draws launch launch_no's exponents and writes the scaled copies into A
 * and B. */
void kl_scaled_inputs(kl_scaled *ss, float *A, float *B, uint64_t seed,
                      uint64_t launch_no);
/* Divides the last drawn scales out of C (M x N), in place. */
void kl_scaled_output(const kl_scaled *ss, float *C);

/* What the caller of kl_run_execute hears on the way (any may be NULL):
 * after_load once the .so is loaded, before any of its code runs (the
 * sandbox tightens its filter there). A paced job's timed launches wait for the
 * driver: go blocks until it says batch n (returns n >= 0; 0 is the untimed
 * warm-up), of *k launches, launch i on set i of the region (kl_pace_buffers),
 * or stop
 * (-1); done(ctx, ok) answers each batch (1 ran, 0 failed: the report
 * says why, and no go follows). */
typedef struct kl_run_hooks {
  void (*after_load)(void *ctx);
  int (*go)(void *ctx, int *k);
  void (*done)(void *ctx, int ok);
  void *ctx;
} kl_run_hooks;

/* Executes job in this process: loads the .so (the candidate's static
 * initialisers run here), makes the inputs, runs every check shape on a
 * poisoned output, then times; hooks (NULL: none) as above. A paced job
 * times on the region after the outputs (outs + kl_run_output_layout's
 * total, kl_pace_floats of them). Always returns with rep filled. */
void kl_run_execute(const kl_run_job *job, kl_run_report *rep, float *outs,
                    const kl_run_hooks *hooks);

/* ---- paced timing (kernels/pace.c) ----
 *
 * A candidate on cpu-emu is native code in its runner's process: whatever
 * that process measures or keeps, the candidate can read and rewrite (its
 * samples, the job's seed, hence every input the runner would make). So
 * under the sandbox the timed launches are driven from the supervisor:
 * before each, it draws fresh A and B from a seed of its own into a
 * region of shared memory (kl_pace_floats: A, B and C, each between
 * canary bands) and poisons C; it takes its clock, says go, and takes it
 * again when the runner says done. Then, before the next launch: the
 * canaries, A and B unchanged, no poison or NaN left in C, and C at 64
 * positions it draws only now against a float64 dot product (the
 * tolerances of kernels.h), both against the copies of A and B it keeps
 * to itself (the runner can write the shared ones). A launch that answers early
 * fails these; one that guesses its inputs cannot (the seed never leaves the
 * driver); a rewritten report changes only the runner's claims, which the
 * evaluation holds to the driver's samples (kernels/check.c). The stopping
 * rule is the runner's: a warm-up, then at least 5 samples and until
 * time_budget_ms, at most max_samples.
 *
 * Where a launch is short, one go starts a batch: k launches back to back,
 * each on a set of inputs of its own (the region holds kl_pace_sets), all
 * of them checked after the batch answered; the sample is the batch's
 * time over k. The frames and wake-ups between two processes (tens of us
 * per go) would otherwise be a large part of a short launch's sample: a
 * third at 64^3 on the emulator. k is chosen from the fastest launch so
 * far, for a batch of about KL_PACE_BATCH_US; the warm-up and the first
 * timed launch go alone. */
#define KL_PACE_MAX_BATCH 16
#define KL_PACE_BATCH_BYTES (1u << 20) /* the sets of a region, at most */
#define KL_PACE_BATCH_US 1000.0
typedef struct kl_pace_io {
  void *ctx;
  /* Tells the runner to run batch n (>= 0; 0 the warm-up) of k launches,
   * or to stop (n = -1). 0 on success. */
  int (*go)(void *ctx, int n, int k);
  /* Waits for the runner's answer to a batch: 1 it ran, 0 it failed (its
   * report says why), -1 anything else (deadline, a closed pipe, a frame
   * out of place; the io keeps what it saw for its caller). */
  int (*done)(void *ctx);
} kl_pace_io;

typedef struct kl_pace_result {
  int ended;   /* 0 the stopping rule, 1 the runner's launch failed, -1 io,
                  -2 no memory here (the runner was told to stop) */
  int samples; /* one per batch: its time over its launches */
  double sample_us[KL_MAX_TIMING_SAMPLES];
  int launches;   /* timed launches in all (the warm-up not counted) */
  int batch_max;  /* the most launches one sample took */
  uint64_t flags; /* canary_overwritten, input_mutated, timed_output_wrong */
  char flag_detail[160];
} kl_pace_result;

/* Floats of job's paced region (0 unless job is timed and paced): the
 * outputs' buffer holds them after kl_run_output_layout's total. */
size_t kl_pace_floats(const kl_run_job *job);
/* Sets of inputs a paced region for the timed shape sh holds (1 to
 * KL_PACE_MAX_BATCH), and the region's floats. */
int kl_pace_sets(kl_shape sh);
size_t kl_pace_region_floats(kl_shape sh);
/* A, B and C of set `set` inside a paced region at base. */
void kl_pace_buffers(kl_shape sh, float *base, int set, float **A, float **B,
                     float **C);
/* Drives job's timed launches over io on region (kl_pace_floats(job)
 * floats, shared with the runner). Always fills res. */
void kl_pace(const kl_run_job *job, float *region, const kl_pace_io *io,
             kl_pace_result *res);
/* Puts the driver's findings into the runner's report (once it arrived):
 * paced samples, flags and their detail. */
void kl_pace_merge(kl_run_report *rep, const kl_pace_result *res);
/* Adds flags to rep's, and detail to its flag_detail when a flag is new
 * (as far as it fits). */
void kl_report_flags(kl_run_report *rep, uint64_t flags, const char *detail);
/* The same for one flag bit, the detail "WHAT at MxNxK". */
void kl_report_flag_at(kl_run_report *rep, int bit, const char *what,
                       kl_shape sh);

/* The checks on one timed launch's output, made by whoever drew its
 * inputs (kl_pace on cpu-emu, kernels/gpu_run.c on the GPU): C0 (M x N,
 * a copy taken when the launch ended) has no poison, NaN or inf; every
 * row passes Freivalds' check (C0 x against A0 (B0 x), x = +-1, at the
 * row's sum of the element-wise bounds); 64 positions against a float64
 * dot product, KL_TOL_ELEM on each and KL_TOL_REL over them. x and the
 * positions come from rng, a secret of the caller's, drawn after the
 * launch. A failure sets timed_output_wrong in res with a detail naming
 * launch n; once it is set, later calls return at once. scratch holds
 * KL_VERIFY_SCRATCH(sh) doubles. The O(M N + M K + K N) passes split by
 * rows over up to `threads` threads (1: the caller's only); the verdict
 * and its detail do not depend on the split. */
#define KL_VERIFY_SCRATCH(sh) ((size_t)(sh).N + 2 * (size_t)(sh).K)
void kl_verify_launch(kl_shape sh, const float *A0, const float *B0,
                      const float *C0, double *scratch, uint64_t *rng, int n,
                      int threads, kl_pace_result *res);
/* 64 bits no other process can know: getrandom, or failing that the clock
 * and the process id. */
uint64_t kl_secret_seed(void);

struct kl_result;
/* Where the two untrusted steps happen. */
typedef struct kl_executor {
  void *ctx;
  /* Same contract as kl_nvrtc_compile with the cache on. */
  int (*compile)(void *ctx, const char *src, size_t len, const char *arch,
                 kl_compiled *out, char *why, size_t whylen);
  /* Runs job; fills rep and outs (n_outs floats). Returns 1 when rep is
   * complete, else 0 with out->status/out->error saying what happened
   * (timeout, crashed:<signal>, killed:seccomp:<name>, ...). */
  int (*run)(void *ctx, const kl_run_job *job, kl_run_report *rep, float *outs,
             size_t n_outs, struct kl_result *out);
  /* The GPU backend's run: the same contract, with the NVRTC cubin (NULL
   * and 0: time cuBLAS SGEMM at job->timed_shape, the baseline). NULL: a
   * forked child (kl_gpu_run_forked). */
  int (*run_gpu)(void *ctx, const kl_run_job *job, const uint8_t *cubin,
                 size_t cubin_size, kl_run_report *rep, float *outs,
                 size_t n_outs, struct kl_result *out);
  /* 1: run paces cpu-emu jobs (kl_pace; the sandbox does), so the
   * evaluation asks for job->paced. */
  int paced;
} kl_executor;

/* Runs body(arg, rep, outs) in a forked child (its own process group) with
 * rep and outs in shared memory, under a wall deadline, and classifies how
 * it ended (timeout, crashed:<signal>, crashed:exit) into out, `what` naming
 * the runner in messages. Returns 1 when rep is complete. */
int kl_run_in_fork(void (*body)(void *arg, kl_run_report *rep, float *outs),
                   void *arg, double deadline_s, const char *what,
                   kl_run_report *rep, float *outs, size_t n_outs,
                   struct kl_result *out);

/* The default kl_executor.run: a forked child of this process with the
 * job's wall deadline, no sandbox (unit tests, benches). */
int kl_run_forked(void *ctx, const kl_run_job *job, kl_run_report *rep,
                  float *outs, size_t n_outs, struct kl_result *out);

/* Everything `kernlab eval` reports about one candidate. */
typedef struct kl_result {
  char file[512];
  char backend[16];
  char status[48]; /* ok, wrong, compile_error, bad_signature, bad_geometry,
                      invalid_input, deadlock, timeout, crashed:<signal>,
                      killed:seccomp:<syscall>, sandbox_error */
  char error[768]; /* one line; empty when status is ok, but for a GPU
                      run that kept no timing sample (it says why) */
  char sha256[65]; /* of the source text */
  int compiled, correct;
  double max_rel_err, max_abs_err;
  double time_us, time_min_us, time_max_us; /* median, min, max; -1 if none */
  double time_p20_us, time_p80_us;          /* quantiles (type 7); -1 if none */
  double time_cv;                           /* stddev / mean of the samples */
  char timer[16];      /* "cupti", "events" (gpu) or "wall" (cpu-emu) */
  char timer_note[96]; /* gpu, timer "events": why CUPTI was not used */
  int samples;
  /* the timed launches behind the samples: more than samples where short
   * launches went in batches (cpu-emu, kl_pace), each sample their mean */
  int timed_launches;
  double gflops;      /* at the target shape; -1 if not timed */
  double baseline_us; /* the naive seed at the target shape; -1 if none */
  kl_resources res;
  kl_launch launch;
  int has_launch;
  double compile_ms; /* NVRTC; -1 where no compile ran (invalid input) */
  int cache_hit;
  int nvrtc; /* 1 if NVRTC compiled it (resources are real) */
  uint64_t seed;
  int confinement;       /* 0 none, 1 seccomp + rlimits, 2 also namespaces */
  uint64_t flags;        /* anti-cheat flags raised (kl_flags bits) */
  char flag_detail[256]; /* the first finding per flag, one line */
  double sample_us[KL_MAX_TIMING_SAMPLES]; /* raw timing samples, in order */
  /* cpu-emu: wall time inside all of the candidate's launches (checks,
   * warm-up, timed runs); the rest of an evaluation is the lab's. 0 on gpu,
   * where launches are asynchronous. */
  double launch_ms;
  kl_shape_check checks[KL_MAX_SHAPES];
  int n_checks;
} kl_result;

/* Fills opts with the defaults described in kl_eval_options. */
void kl_eval_defaults(kl_eval_options *opts);

/* Resolves a requested backend: "gpu" if a device answers (kl_gpu_probe,
 * asked once in a forked child), else for "auto" "cpu-emu". Returns KL_OK,
 * KL_EINPUT for an unknown name, or KL_EENV for `gpu` without a device; `why`
 * says which and why (for KL_EENV the probe's reason alone: the caller names
 * what asked for the device). Call it first before starting threads (the probe is
 * then cached); later calls may come from any thread at once (every
 * evaluation resolves its backend again, kl_eval_source). */
int kl_backend_resolve(const char *requested, char *backend, size_t len,
                       char *why, size_t whylen);

/* The device a backend's times come from, for results files and JSON rows:
 * for "gpu" the name the last successful kl_backend_resolve probed
 * ("NVIDIA H200"), for "cpu-emu" "cpu (MODEL)" with /proc/cpuinfo's model
 * name (or "cpu"). Writes at most len bytes to out; returns out. */
const char *kl_backend_device(const char *backend, char *out, size_t len);

/* Evaluates one candidate source: validate, NVRTC compile (resources,
 * geometry), host compile for cpu-emu, correctness on every shape with fresh
 * seeded inputs and NaN-poisoned outputs, timing at the target shape. Runs
 * happen in a child process with a wall deadline, so a crashing or hanging
 * kernel costs only its own result. Returns KL_OK when the candidate was
 * evaluated (whatever it did), KL_EINPUT when the text or its geometry is
 * invalid, KL_EENV when the environment is missing something. */
int kl_eval_source(const char *label, const char *src, size_t len,
                   const kl_eval_options *opts, kl_result *out);

/* Times the naive seed (embedded) at shape s on the same backend with the
 * same protocol. Returns the median in microseconds, or -1 with why. */
double kl_eval_baseline(kl_shape s, const kl_eval_options *opts, char *why,
                        size_t whylen);

/* The naive seed's text, embedded from kernels/seeds/01_naive.cu. */
extern const char kl_seed_naive[];

/* Deterministic inputs: uniform in [-1, 1), from (seed, stream). */
void kl_fill_random(float *x, size_t n, uint64_t seed, uint64_t stream);
/* Values first .. first + n - 1 of the same stream: any part of it. */
void kl_fill_random_at(float *x, size_t n, uint64_t seed, uint64_t stream,
                       size_t first);
/* kl_fill_random split over up to `threads` threads (kernels/pace.c):
 * the same values. */
void kl_fill_random_mt(float *x, size_t n, uint64_t seed, uint64_t stream,
                       int threads);
/* The generator behind it: advances *s, returns the next 64 bits. */
uint64_t kl_splitmix64(uint64_t *s);

/* Float64 reference C = A*B, plus S = |A|*|B| (the element error scale). */
void kl_reference(const float *A, const float *B, double *R, double *S, int M,
                  int N, int K);
/* How many references kl_eval_source took from its cache instead of
 * computing them (kernels/check.c: candidates evaluated with the same seed
 * share their references). */
int64_t kl_reference_cache_hits(void);

/* Compares C against R and S; fills ck (shape must be set). */
void kl_compare(const float *C, const double *R, const double *S,
                kl_shape_check *ck);

/* A candidate's fp32 product c against another fp32 product d of the same
 * inputs: the policy's default path, which --policy-matmul checks a kernel
 * against (lab/policy_matmul.c before the first step, policy/model.c and
 * policy/cuda/pcuda_runtime.c at each new shape). One rule for all three:
 * both sides round, so the tolerances above are doubled. c, d and bound
 * are M x N with leading dimension ld; bound[i] is the element's scale,
 * |alpha| sum_k |a_ik||b_kj| + |beta c0_i| (pl_gemm_bound). It passes when
 * every c is finite, every |c - d| <= 2 KL_TOL_ELEM bound and
 * ||c - d||_F <= 2 KL_TOL_REL ||d||_F. */
typedef struct kl_fp32_agreement {
  long nonfinite; /* NaN or inf elements of c (unwritten ones among them) */
  long over;      /* finite elements over the element bound */
  long first;     /* row * ld + col of the first bad element, or -1 */
  double rel;     /* relative Frobenius error, over finite elements */
  double worst;   /* the largest error / tolerance, elements and norm */
  int pass;
} kl_fp32_agreement;
void kl_compare_fp32(const float *c, const float *d, const float *bound, int M,
                     int N, int ld, kl_fp32_agreement *a);
/* A failed agreement in words, for a message that names the call first:
 * "N elements NaN/inf (unwritten?), N over 2e-04 x sum|a||b|, relative
 * Frobenius error E (tolerance 2e-05); first at [r][c]: x vs y". */
void kl_fp32_agreement_say(const kl_fp32_agreement *a, const float *c,
                           const float *d, int ld, char *why, size_t len);

/* The bit pattern used to poison outputs (a quiet NaN with a payload). */
#define KL_POISON_BITS 0x7fc0deadu
void kl_poison(float *C, size_t n);

/* ---- anti-cheat flags (kernels/flags.c) and the static scanner
 * (kernels/scan.c) ---------------------------------------------------------
 *
 * A flag names one reward hack the lab detected. Names are stable (JSON,
 * results, Lua); bits are stable too. Static flags (bits 0..31) come from
 * kl_scan on the text; dynamic flags (bits 32..63) from the evaluation's
 * runs. Raising a flag never changes `correct`; Lua decides penalties. */

typedef uint64_t kl_flags;
#define KL_FLAG(bit) ((kl_flags)1 << (bit))

enum {
  /* static */
  KL_FLAG_INLINE_ASM = 0,
  KL_FLAG_TIMER_READ = 1,
  KL_FLAG_PRINTF = 2,
  KL_FLAG_DEVICE_MALLOC = 3,
  KL_FLAG_STREAM_OR_EVENT = 4,
  KL_FLAG_GRAPH_OR_DYNPAR = 5,
  KL_FLAG_COOP_GRID_SYNC = 6,
  KL_FLAG_MUTABLE_DEVICE_STATE = 7,
  KL_FLAG_COMPILE_PASS_BRANCH = 8,
  KL_FLAG_DISALLOWED_INCLUDE = 9,
  KL_FLAG_OVERSIZE_SOURCE = 10,
  KL_FLAG_PRECISION_DOWNGRADE = 11,
  KL_FLAG_RUNTIME_API = 12,
  /* dynamic */
  KL_FLAG_OUTPUT_NOT_WRITTEN = 32,
  KL_FLAG_CANARY_OVERWRITTEN = 33,
  KL_FLAG_INPUT_MUTATED = 34,
  KL_FLAG_NONDETERMINISTIC = 35,
  KL_FLAG_TIMED_OUTPUT_WRONG = 36,
  KL_FLAG_SHAPE_SPECIAL_CASED = 37,
  KL_FLAG_IMPLAUSIBLE_SPEED = 38,
};
#define KL_FLAGS_STATIC ((kl_flags)0xffffffffu)
#define KL_FLAGS_DYNAMIC (~KL_FLAGS_STATIC)

#define KL_FLAG_KIND_STATIC "static"
#define KL_FLAG_KIND_DYNAMIC "dynamic"

typedef struct kl_flag_info {
  int bit;                 /* KL_FLAG_* */
  const char *name;        /* stable snake_case name */
  const char *kind;        /* KL_FLAG_KIND_STATIC or KL_FLAG_KIND_DYNAMIC */
  const char *description; /* one line: what raised it */
  const char *hack;        /* one line: the reward hack it answers */
} kl_flag_info;

/* The whole table, static rows first, in bit order; *n gets the count.
 * Static storage, never freed. */
const kl_flag_info *kl_flag_table(size_t *n);
/* The row of a bit, or NULL. */
const kl_flag_info *kl_flag_find(int bit);
/* The stable name of a bit, or NULL for an unknown bit. */
const char *kl_flag_name(int bit);
/* The bit of a name, or -1. */
int kl_flag_bit(const char *name);
/* Writes the names of the raised flags, in table order, joined by sep, into
 * buf (always NUL-terminated when len > 0). Returns the length the full
 * text needs (as snprintf does). */
size_t kl_flags_format(kl_flags flags, const char *sep, char *buf, size_t len);

/* Sources above this many bytes raise oversize_source (those above
 * KL_MAX_SOURCE_BYTES are rejected before any scan). */
#define KL_SCAN_OVERSIZE_BYTES (64 * 1024)

/* Scans a candidate's text and returns the static flags it raises. Works on
 * the text with line splices joined and comments removed; string literals
 * raise nothing, except those inside a file that uses inline asm (PTX
 * strings are searched for %clock, %globaltimer and low-precision types).
 * Token pasting in #define bodies is followed: a literal paste (cl ## ock64)
 * and the arguments of a pasting macro's invocations are joined and checked
 * as names. detail (may be NULL) receives one line: the first finding of
 * each raised flag, "name: line N: what; ...", truncated to detail_len. */
kl_flags kl_scan(const char *src, size_t len, char *detail, size_t detail_len);

/* ---- timing statistics and the stopping rule (kernels/stats.c) -----------
 *
 * A streaming sampler both backends feed one timed sample at a time: it
 * drops throttled samples, says when to stop, and summarises what it kept.
 * Plain data, no allocation (a fixed array of KL_STATS_MAX_SAMPLES), so it
 * lives on the stack and can cross a pipe. Definitions and the reasons for
 * them are in the header comment of kernels/stats.c. */

#define KL_STATS_MAX_SAMPLES 1000

typedef struct kl_stats_rule {
  int min_samples;         /* kept samples before stopping (default 10) */
  double min_total_us;     /* kept measured time before stopping (500000) */
  double target_rel_noise; /* stop when rel_noise < this (0.005); 0: never */
  int max_samples;         /* cap on samples offered (1000, <= the max) */
  double max_total_us;     /* cap on measured time offered (10 s) */
  double throttle_ratio;   /* discard below this x default clock (0.75) */
} kl_stats_rule;

/* What kl_stats_add did with a sample. */
enum {
  KL_STATS_SAMPLE_KEPT = 0,
  KL_STATS_SAMPLE_THROTTLED = 1, /* clock known and below the ratio */
  KL_STATS_SAMPLE_INVALID = 2,   /* time not finite or not > 0 */
  KL_STATS_SAMPLE_FULL = 3,      /* KL_STATS_MAX_SAMPLES kept already */
};

/* Why sampling stopped (or did not yet). Names: kl_stats_stop_name. */
enum {
  KL_STATS_STOP_RUNNING = 0,
  KL_STATS_STOP_CONVERGED = 1,  /* floors met and rel_noise < target */
  KL_STATS_STOP_SAMPLE_CAP = 2, /* max_samples offered */
  KL_STATS_STOP_TIME_CAP = 3,   /* max_total_us offered */
};

typedef struct kl_sampler {
  kl_stats_rule rule;
  int n_kept, n_throttled, n_invalid;
  int n_offered;     /* every kl_stats_add that was not FULL */
  int throttled_run; /* consecutive throttled samples (recovery delay) */
  int ci_rank;       /* rank l of the median's 95% interval; 0: none */
  double kept_us;    /* sum of kept samples */
  double offered_us; /* sum of kept and throttled samples */
  double us[KL_STATS_MAX_SAMPLES];     /* kept samples, in arrival order */
  double sorted[KL_STATS_MAX_SAMPLES]; /* the same, ascending */
} kl_sampler;

/* The summary. Times are in microseconds; -1 where undefined (no kept
 * sample; ci_lo, ci_hi and rel_noise also with fewer than 6). */
typedef struct kl_stats {
  int n_kept, n_throttled, n_invalid, n_offered;
  int n_outliers; /* kept samples above outlier_fence; not removed */
  double median, min, max, p20, p80, p25, p75; /* type-7 quantiles */
  double mean, stddev, cv; /* Bessel-corrected; stddev 0 and cv 0 if n=1 */
  double ci_lo, ci_hi;     /* distribution-free 95% interval of the median */
  double rel_noise;        /* (ci_hi - ci_lo) / 2 / median */
  double outlier_fence;    /* median + 3 * (p75 - p25) */
  double kept_us, offered_us;
  int stop; /* KL_STATS_STOP_* */
} kl_stats;

/* Fills rule with the defaults above. */
void kl_stats_rule_defaults(kl_stats_rule *rule);
/* Checks a rule: min_samples >= 1, max_samples in [min_samples,
 * KL_STATS_MAX_SAMPLES], times and ratios finite (max_total_us may be
 * +inf) and >= 0, max_total_us > 0, throttle_ratio <= 1. Returns KL_OK, or
 * KL_EINPUT with the field and what was expected in why. */
int kl_stats_rule_check(const kl_stats_rule *rule, char *why, size_t whylen);
/* Starts an empty sampler under rule (NULL: the defaults). Returns KL_OK,
 * or KL_EINPUT for a rule kl_stats_rule_check rejects; the sampler then
 * runs under the defaults, so it is always usable. */
int kl_stats_init(kl_sampler *s, const kl_stats_rule *rule);
/* Offers one sample of us microseconds, taken at sm_clock_mhz with the
 * device's default clock default_clock_mhz (either <= 0: unknown, and the
 * sample is kept). Returns KL_STATS_SAMPLE_*. */
int kl_stats_add(kl_sampler *s, double us, double sm_clock_mhz,
                 double default_clock_mhz);
/* KL_STATS_STOP_*: converged first, then the sample cap, then the time
 * cap, when several hold at once. */
int kl_stats_stop_reason(const kl_sampler *s);
/* 1 when kl_stats_stop_reason is not KL_STATS_STOP_RUNNING. */
int kl_stats_done(const kl_sampler *s);
/* "running", "converged", "sample_cap", "time_cap"; "unknown" otherwise. */
const char *kl_stats_stop_name(int stop);
/* Summarises the kept samples (works at any point, also with none). */
void kl_stats_summary(const kl_sampler *s, kl_stats *out);
/* Type-7 quantile (numpy's default) of n ascending values, p in [0, 1]:
 * h = (n - 1) p, x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h]).
 * -1 when n is 0. */
double kl_stats_quantile(const double *sorted, size_t n, double p);
/* Sorts v ascending in place (heapsort): no allocation and no system call,
 * so it is safe inside a confined worker, where glibc's qsort is not (for
 * arrays of 1 KiB or more its merge sort asks sysconf(_SC_PHYS_PAGES),
 * i.e. the sysinfo syscall, which the run-gpu filter traps). NaNs sort
 * last. */
void kl_stats_sort(double *v, size_t n);
/* The median of n values (sorted in place by kl_stats_sort; -1 when n is
 * 0): what the run-gpu worker reports after its filter is installed. */
double kl_stats_median(double *v, size_t n);

/* ---- the GPU backend (kernels/gpu.c, kernels/gpu_run.c) -------------------
 *
 * libcuda, libcupti and libcublas are loaded with dlopen, so one binary runs
 * with or without a GPU. The lab process makes no CUDA call: kl_gpu_probe
 * asks in a forked child; runs happen in `kernlab __worker run-gpu`, which
 * calls kl_gpu_init, confines itself, then kl_gpu_run_execute. */

/* Shapes with M*N*K above this are checked against a float64 cuBLAS DGEMM
 * in the run worker (after the candidate ran, in fresh allocations) rather
 * than kl_reference in the lab: 512^3 takes ~0.2 s on the host, 4096^3
 * minutes. */
#define KL_GPU_HOST_REF_MAX_MNK (512.0 * 512.0 * 512.0)
/* 1 when the GPU backend checks shape s in the worker (dev_checks). */
int kl_gpu_device_ref(kl_shape s);

/* Does a CUDA device answer? Asks once, in a forked child (the calling
 * process never initialises CUDA, so it may fork workers afterwards), and
 * caches the answer. KL_OK with device_name set, else KL_EENV with why:
 * "no driver (libcuda.so.1 not found)", "driver present but no device
 * (cuInit: CUDA_ERROR_NO_DEVICE)", ... Call before starting threads. */
int kl_gpu_probe(char *why, size_t whylen, char *device_name, size_t len);

/* Initialises CUDA in THIS process (a run worker, before its seccomp
 * filter): driver, device 0's primary context (blocking sync), CUPTI
 * CONCURRENT_KERNEL activity (optional: without it timing uses events and
 * says so), cuBLAS (optional: needed for the baseline and the float64
 * reference), the L2 flush buffer, and a small cuBLAS warm-up. Returns KL_OK
 * or KL_EENV with why. Idempotent. */
int kl_gpu_init(char *why, size_t whylen);

/* Runs job on the GPU: loads cubin (NULL: cuBLAS SGEMM, the baseline),
 * reads kl_launch from the module, records attributes and occupancy, checks
 * every shape on NaN-poisoned outputs with canary bands, runs shape 0 again,
 * then times, each launch on inputs of its own checked after it
 * (kl_verify_launch), with an L2 flush before each sample
 * (CUPTI kernel records; events and host wall time as cross-checks; the
 * kl_stats stopping rule). Same output contract as kl_run_execute. After a
 * CUDA error rep->gpu.status is "cuda:<NAME>" and the context is unusable:
 * the caller must end the process after replying. */
void kl_gpu_run_execute(const kl_run_job *job, const uint8_t *cubin,
                        size_t cubin_size, kl_run_report *rep, float *outs);

/* kl_executor.run_gpu without a sandbox: a forked child of a process that
 * never touched CUDA (tests, benches). */
int kl_gpu_run_forked(void *ctx, const kl_run_job *job, const uint8_t *cubin,
                      size_t cubin_size, kl_run_report *rep, float *outs,
                      size_t n_outs, struct kl_result *out);

/* One GPU run (a candidate's job, or cuBLAS when cubin is NULL) through
 * opts->exec->run_gpu, or kl_gpu_run_forked without one, holding the lab
 * process's GPU lock for its whole length: one GPU run at a time, however
 * many evaluation threads there are, and across this user's kernlab
 * processes (a file lock; kernels/gpu.c). Parallel runs on the one device would
 * time each other's contention (and share its memory); compiles, reference
 * computations and scoring stay parallel. Returns what the executor does. */
int kl_gpu_run(const kl_eval_options *opts, const kl_run_job *job,
               const uint8_t *cubin, size_t cubin_size, kl_run_report *rep,
               float *outs, size_t n_outs, struct kl_result *out);
/* The same lock, for other device work of the lab process that must not
 * overlap a GPU run: the policy sampling on the device while candidates
 * are evaluated (lab/run_cmd.c). Never held across a wait for a run. */
void kl_gpu_lock(void);
void kl_gpu_unlock(void);

/* cuBLAS SGEMM (row-major C = A*B) at shape s with the same protocol, in a
 * worker (opts->exec->run_gpu) or a forked child. Returns the median in
 * microseconds, or -1 with why. cv (may be NULL) gets the samples' CV. */
double kl_gpu_cublas_time_us(kl_shape s, const kl_eval_options *opts,
                             double *cv, char *why, size_t whylen);

#endif
