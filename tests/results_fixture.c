/*
 * tests/results_fixture.c — writes a small results file through the store's
 * API, for the CLI and python tests: N synthetic candidates (default 30;
 * tests/unit/results_gen.h says what each holds), a step every 8, reward
 * components that grow a column at candidate 10, four flag names.
 *
 * usage: results_fixture OUT.h5 [N] [--abandon | --schema-version V]
 *   --abandon: exit without closing, as a killed writer would (the file
 *   keeps its "open for SWMR write" mark);
 *   --schema-version V: afterwards rewrite the schema_version attribute (to
 *   make a file from a "newer kernlab").
 */
#include "unit/results_gen.h"

#include <hdf5.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: results_fixture OUT.h5 [N]\n");
    return 2;
  }
  int n = 30, abandon = 0, schema = 0;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--abandon"))
      abandon = 1;
    else if (!strcmp(argv[i], "--schema-version") && i + 1 < argc)
      schema = atoi(argv[++i]);
    else
      n = atoi(argv[i]);
  }
  const res_campaign_meta meta = {
      .config =
          "-- fixture campaign\nreturn { task = 'fp32_256', steps = 4 }\n",
      .reward_script = "lua/reward/default.lua",
      .reward_sha256 =
          "0000000000000000000000000000000000000000000000000000000000000007",
      .device = "cpu-emu (fixture)",
      .backend = "cpu-emu",
      .kernlab_version = "0.1",
      .seed = 42,
      .flag_names = gen_flag_names,
      .n_flags = 4,
      .component_names = (const char *const[]){"correctness", "speed"},
      .n_components = 2,
  };
  char why[512];
  int code;
  res_file *f = res_open_append(argv[1], &meta, &code, why, sizeof why);
  if (!f) {
    fprintf(stderr, "results_fixture: %s\n", why);
    return code;
  }
  for (int64_t i = 0; i < n; i++)
    if (gen_append(f, i, why, sizeof why) != RES_OK) {
      fprintf(stderr, "results_fixture: %s\n", why);
      return 3;
    }
  if (abandon) _exit(0);
  if (res_close(f, why, sizeof why) != RES_OK) {
    fprintf(stderr, "results_fixture: %s\n", why);
    return 3;
  }
  if (schema) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
    hid_t fid = H5Fopen(argv[1], H5F_ACC_RDWR, fapl);
    hid_t a = H5Aopen(fid, "schema_version", H5P_DEFAULT);
    int32_t v = schema;
    herr_t e = H5Awrite(a, H5T_NATIVE_INT32, &v);
    H5Aclose(a);
    H5Fclose(fid);
    H5Pclose(fapl);
    if (e < 0) return 3;
  }
  return 0;
}
