/*
 * lab/generate_cmd.c — `kernlab generate`: loads a checkpoint and its
 * tokenizer, samples G completions of one prompt with pl_generate (KV
 * cache, one RNG stream per completion) and prints them.
 *
 *   kernlab generate --ckpt F [--tok F.tok] --prompt TEXT [-n G]
 *                    [--max-tokens N] [--temperature T] [--top-p P]
 *                    [--min-p M] [--seed S] [--no-bos]
 *                    [--policy-device cpu|gpu|auto] [--policy-dtype fp32|bf16]
 *                    [--policy-matmul RUN.h5]
 *
 * The prompt is <|bos|> (unless --no-bos) then TEXT's tokens; a completion
 * stops at <|eos|>, at N tokens, or at the model's max_seq. Each completion
 * is printed after a header line "== completion g: L tokens, stop REASON,
 * mean logprob X ==", the end token not printed. It does not pick a prompt
 * format: the caller writes the task header (see lua/corpus.lua).
 * On a terminal a completion is shown as `kernlab show` shows a source
 * (lab_fput_printable: control bytes and bytes that are not UTF-8 as '?'):
 * a policy's bytes are anyone's, and an escape sequence among them reached
 * the terminal raw. Into a pipe or a file the bytes go exact.
 *
 * --tok defaults to F.tok, where `kernlab prime --out F` saves the
 * checkpoint's tokenizer (and `run` looks by default). Without --tok and
 * without F.tok the message says both, exit 2; a missing checkpoint is
 * named first, since F.tok was derived from a name that is not there.
 *
 * --policy-device (lab/policy_device.h): cpu (the default) samples with
 * pl_generate; gpu with pcuda_generate on the device, exit 3 with the
 * reason where none answers; auto takes the device when one answers and
 * says so otherwise. A fixed seed gives the same tokens on both in fp32
 * (test_policy_cuda_gen checks that on a device). --policy-dtype bf16 (a
 * device only) samples with bf16 GEMM operands, as a bf16 campaign does.
 *
 * --policy-matmul RUN.h5 (lab/policy_matmul.c): the model's GEMMs through
 * the best correct, unflagged kernel of a results file: on the CPU
 * emulator (slow), or NVRTC's cubin on the policy's device; checked
 * against the default path first, exit 2 when it disagrees.
 *
 * Exit codes: 0, 2 bad usage / bad or mismatched file, 3 I/O or memory.
 */
#include "lab/lab.h"
#include "lab/policy_device.h"

#include "policy/policy.h"
#include "sandbox/sandbox.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char synopsis[] =
    "usage: kernlab generate --ckpt FILE [--tok FILE.tok] --prompt TEXT [-n "
    "G]\n"
    "         [--max-tokens N] [--temperature T] [--top-p P] [--min-p M]\n"
    "         [--seed S] [--no-bos] [--policy-device cpu|gpu|auto]\n"
    "         [--policy-dtype fp32|bf16] [--policy-matmul RUN.h5]\n"
    "       --tok defaults to FILE.tok, where kernlab prime saves the\n"
    "       checkpoint's tokenizer\n";

static int usage(const char *msg, const char *arg) {
  fprintf(stderr, "kernlab generate: %s%s%s\n%s", msg, arg ? " " : "",
          arg ? arg : "", synopsis);
  return LAB_EXIT_USAGE;
}

/* Parses a finite number that must use all of s; 0 when it does not
 * ("nan" would pass every range check below and become INT_MIN). */
static int parse_num(const char *s, double *out) {
  return lab_arg_double(s, -1e300, 1e300, out) == 0;
}

/* With --tok left out: 1 (after saying why on stderr) when the checkpoint
 * cannot be read or its default tokenizer tok_path (CKPT.tok) is not there;
 * 0 to go on loading both. The message names what is missing and, through
 * lab_tok_load, a leftover of an interrupted prime holding the tokenizer. */
static int default_tok_missing(const char *ckpt, const char *tok_path) {
  char why[8192];
  pl_ckpt_header h;
  if (pl_ckpt_peek(ckpt, &h, why, sizeof why) != PL_OK) {
    fprintf(stderr, "kernlab generate: %s\n", why);
    return 1;
  }
  struct stat st;
  if (stat(tok_path, &st) == 0 && !S_ISDIR(st.st_mode)) return 0;
  pl_tokenizer *tok = NULL;
  if (lab_tok_load(&tok, tok_path, ckpt, why, sizeof why) == PL_OK) {
    pl_tok_free(tok);
    return 0;
  }
  fprintf(stderr,
          "kernlab generate: no --tok given, and no tokenizer at %s, where "
          "kernlab prime saves the checkpoint's (%s); name one with --tok "
          "FILE.tok\n",
          tok_path, why);
  return 1;
}

int lab_generate(int argc, char **argv) {
  const char *ckpt = NULL, *tok_path = NULL, *prompt = NULL;
  const char *policy_matmul = NULL;
  int policy_device = LAB_POLICY_CPU, policy_dtype = PCUDA_DTYPE_FP32;
  double G = 1, max_new = 256;
  uint64_t seed = 0;
  pl_sampling s = pl_sampling_default();
  int bos = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    double x;
    if (!strcmp(a, "--no-bos")) {
      bos = 0;
      continue;
    }
    if (!v) return usage("missing value after", a);
    i++;
    if (!strcmp(a, "--ckpt"))
      ckpt = v;
    else if (!strcmp(a, "--tok"))
      tok_path = v;
    else if (!strcmp(a, "--prompt"))
      prompt = v;
    else if (!strcmp(a, "--policy-matmul"))
      policy_matmul = v;
    else if (!strcmp(a, "--policy-device")) {
      policy_device = lab_policy_device_parse(v);
      if (policy_device < 0)
        return usage("--policy-device: expected cpu, gpu or auto, got", v);
    } else if (!strcmp(a, "--policy-dtype")) {
      policy_dtype = lab_policy_dtype_parse(v);
      if (policy_dtype < 0)
        return usage("--policy-dtype: expected fp32 or bf16, got", v);
    } else if (!strcmp(a, "--seed")) {
      if (lab_arg_u64(v, 0, &seed))
        return usage("--seed: expected an integer from 0 to 2^64-1, got", v);
    } else if (!parse_num(v, &x))
      return usage("expected a finite number, got", v);
    else if (!strcmp(a, "-n"))
      G = x;
    else if (!strcmp(a, "--max-tokens"))
      max_new = x;
    else if (!strcmp(a, "--temperature") || !strcmp(a, "--top-p") ||
             !strcmp(a, "--min-p")) {
      /* the sampler's checks would name the float it became (inf, 0),
       * not what was typed */
      float f = (float)x;
      if (isinf(f) || (f == 0.0f && x != 0.0)) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 "%s: %s does not fit a float (it would be %g); expected 0 "
                 "or a magnitude from about 1e-45 to 3e38",
                 a, v, (double)f);
        return usage(msg, NULL);
      }
      *(!strcmp(a, "--temperature") ? &s.temperature
        : !strcmp(a, "--top-p")     ? &s.top_p
                                    : &s.min_p) = f;
    } else
      return usage("unknown option", a);
  }
  if (!ckpt || !prompt) return usage("--ckpt and --prompt are required", NULL);
  char tok_default[4200];
  if (!tok_path) {
    int n = snprintf(tok_default, sizeof tok_default, "%s.tok", ckpt);
    if (n < 0 || (size_t)n >= sizeof tok_default)
      return usage("--ckpt: path too long", NULL);
    tok_path = tok_default;
    if (default_tok_missing(ckpt, tok_path)) return LAB_EXIT_USAGE;
  }
  if (G < 1 || G > 4096 || max_new < 1 || max_new > 1e6 || G != (int)G ||
      max_new != (int)max_new)
    return usage("-n must be a whole number 1..4096, --max-tokens 1..1e6",
                 NULL);

  char why[512];
  /* The device first, so that a run asked for the GPU fails at once. */
  pcuda_ctx *dev = NULL;
  int ex =
      lab_policy_open(policy_device, policy_dtype, policy_matmul != NULL,
                      "kernlab generate", &dev, &policy_dtype, why, sizeof why);
  if (ex != LAB_EXIT_OK) {
    fprintf(stderr, "kernlab generate: %s\n", why);
    return ex;
  }
  lab_policy pol;
  memset(&pol, 0, sizeof pol);
  int bound = 0;
  pl_tokenizer *tok = NULL;
  pl_model m;
  memset(&m, 0, sizeof m);
  int32_t *ids = NULL, *full = NULL;
  size_t n_ids = 0;
  pl_generation out;
  memset(&out, 0, sizeof out);
  lab_matmul *mm = NULL;
  pl_ckpt_header h;
  int rc = lab_tok_load(&tok, tok_path, ckpt, why, sizeof why);
  if (!rc)
    rc = lab_load_model(&m, &h, ckpt, tok, tok_path, NULL, NULL, why,
                        sizeof why);
  if (!rc) {
    /* The policy takes dev (and closes it); on the CPU it only holds m. */
    if (lab_policy_init(&pol, dev, policy_dtype, &m, NULL, NULL, why,
                        sizeof why)) {
      fprintf(stderr, "kernlab generate: policy device: %s\n", why);
      lab_policy_close(&pol);
      pl_model_free(&m);
      pl_tok_free(tok);
      return LAB_EXIT_ENV;
    }
    bound = 1;
    dev = NULL;
  }
  if (!rc && policy_matmul) {
    kl_emu_set_launcher(sbx_host_compile_launcher());
    ex = lab_policy_matmul_open(policy_matmul, pol.ctx, &m.cfg, (int)G, &mm,
                                why, sizeof why);
    if (ex) {
      fprintf(stderr, "kernlab generate: %s\n", why);
      lab_policy_close(&pol);
      pl_model_free(&m);
      pl_tok_free(tok);
      return ex;
    }
    fprintf(stderr, "kernlab generate: policy GEMMs through %s\n",
            lab_policy_matmul_describe(mm));
  }
  if (!rc)
    rc = pl_tok_encode(tok, prompt, strlen(prompt), &ids, &n_ids, why,
                       sizeof why);
  if (!rc && !(full = malloc((n_ids + 1) * sizeof *full))) {
    snprintf(why, sizeof why, "out of memory");
    rc = PL_EENV;
  }
  if (!rc && !bos && !n_ids) {
    snprintf(why, sizeof why,
             "the prompt is empty: with --no-bos, --prompt must give at least "
             "one token");
    rc = PL_EINPUT;
  }
  /* said in the options' terms, <|bos|> counted aloud (pl_generate's
   * check said 'generate: prompt of N tokens', N with the bos) */
  const int room = m.cfg.max_seq - 1 - bos; /* prompt tokens that fit */
  if (!rc && room < 1) {
    snprintf(why, sizeof why,
             "the model's context (max_seq) is %d token%s: no room for a "
             "prompt%s and a completion",
             m.cfg.max_seq, m.cfg.max_seq == 1 ? "" : "s",
             bos ? ", <|bos|>" : "");
    rc = PL_EINPUT;
  } else if (!rc && n_ids > (size_t)room) {
    char with_bos[48] = "";
    if (bos)
      snprintf(with_bos, sizeof with_bos, " (%zu with <|bos|>)", n_ids + 1);
    snprintf(why, sizeof why,
             "--prompt is %zu tokens%s; the model's context (max_seq) is %d: "
             "expected at most %d, leaving room for a completion",
             n_ids, with_bos, m.cfg.max_seq, room);
    rc = PL_EINPUT;
  }
  if (!rc) {
    size_t n = 0;
    if (bos) full[n++] = PL_TOK_BOS;
    memcpy(full + n, ids, n_ids * sizeof *ids);
    n += n_ids;
    rc = lab_policy_generate(&pol, full, (int)n, (int)G, (int)max_new,
                             PL_TOK_EOS, &s, seed, &out, NULL, NULL, why,
                             sizeof why);
  }
  static const char *const reason[] = {"?", "eos", "max-tokens", "max_seq"};
  const int tty = isatty(STDOUT_FILENO);
  for (int g = 0; !rc && g < out.G; g++) {
    int len = out.lengths[g];
    const int32_t *t = out.tokens + (size_t)g * out.max_new;
    double lp = 0;
    for (int i = 0; i < len; i++)
      lp += out.logprobs[(size_t)g * out.max_new + i];
    int shown = out.stop[g] == PL_STOP_EOS ? len - 1 : len;
    char *text = NULL;
    size_t text_len = 0;
    rc =
        pl_tok_decode(tok, t, (size_t)shown, &text, &text_len, why, sizeof why);
    if (rc) break;
    printf("== completion %d: %d tokens, stop %s, mean logprob %.3f ==\n", g,
           len, reason[out.stop[g] & 3], len ? lp / len : 0.0);
    if (tty)
      lab_fput_printable(text, text_len, stdout);
    else
      fwrite(text, 1, text_len, stdout);
    if (!text_len || text[text_len - 1] != '\n') putchar('\n');
    free(text);
  }
  if (rc) fprintf(stderr, "kernlab generate: %s\n", why);
  if (mm) {
    char line[512];
    lab_policy_matmul_report(mm, line, sizeof line);
    fprintf(stderr, "kernlab generate: --policy-matmul: %s\n", line);
    lab_policy_matmul_close(mm);
  }
  if (bound) lab_policy_close(&pol);
  if (dev) pcuda_close(dev);
  pl_generation_free(&out);
  free(full);
  free(ids);
  pl_model_free(&m);
  pl_tok_free(tok);
  return rc == PL_OK     ? LAB_EXIT_OK
         : rc == PL_EENV ? LAB_EXIT_ENV
                         : LAB_EXIT_USAGE;
}
