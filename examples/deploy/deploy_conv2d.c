/* An app's side of cltune deploy, in plain C99 against the OpenCL C API: read the device's name, pick
   the tuned setting for the shape from cltune_conv2d.h (or, with --tuning, from the flat tuning file),
   build conv2d.cl with its options, run its launches and check the answer against a reference file
   written by `cltune reference`. Exit 0: right answer; 1: wrong answer; 2: usage, input or OpenCL error;
   3: no setting for this device and shape.

   usage: deploy_conv2d [--tuning FILE.tsv] [--as-device NAME] [--device N] [--kernels DIR] REFERENCE
          deploy_conv2d [--device N] --print-device    (the name a tuning must carry for this device) */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cltune_conv2d.h"
#include "tuning_file.h"

typedef struct {
    char problem[256];
    double rtol, atol;
    long n[4]; /* x, w, b, y */
    float *data[4];
} reference;

static int read_reference(const char *path, reference *ref) {
    static const char names[4] = {'x', 'w', 'b', 'y'};
    char magic[64], tag[8];
    int version, i;
    FILE *fh = fopen(path, "r");
    if (!fh) { fprintf(stderr, "error: %s: cannot open\n", path); return -1; }
    if (fscanf(fh, "%63s %d problem %255s rtol %lf atol %lf", magic, &version, ref->problem,
               &ref->rtol, &ref->atol) != 5 || strcmp(magic, "cltune-reference") || version != 1) {
        fprintf(stderr, "error: %s: not a cltune reference file (version 1)\n", path);
        fclose(fh);
        return -1;
    }
    for (i = 0; i < 4; ++i) {
        long j;
        if (fscanf(fh, "%7s %ld", tag, &ref->n[i]) != 2 || tag[0] != names[i] || ref->n[i] < 0) break;
        ref->data[i] = malloc(sizeof(float) * (size_t)(ref->n[i] ? ref->n[i] : 1));
        for (j = 0; j < ref->n[i] && fscanf(fh, "%f", &ref->data[i][j]) == 1; ++j) {}
        if (j != ref->n[i]) break;
    }
    fclose(fh);
    if (i < 4) { fprintf(stderr, "error: %s: its %c values are cut short or malformed\n", path, names[i]); return -1; }
    if (ref->n[2] == 0) { /* no bias: the kernel still reads one, as zeros (out_c of them) */
        long k = 0;
        sscanf(ref->problem, "n%*d_c%*d_h%*d_w%*d_k%ld", &k);
        free(ref->data[2]);
        ref->data[2] = calloc((size_t)(k > 0 ? k : 1), sizeof(float));
        ref->n[2] = k;
    }
    return 0;
}

/* Each of the launch's space-separated arguments: a buffer by name, an int, or a float ending in f. */
static int set_args(cl_kernel k, const char *args, cl_mem bufs[4]) {
    static const char *names[4] = {"x", "w", "b", "out"};
    char list[4096], *tok;
    cl_uint i = 0;
    strncpy(list, args, sizeof list - 1);
    list[sizeof list - 1] = '\0';
    for (tok = strtok(list, " "); tok; tok = strtok(NULL, " "), ++i) {
        int b, found = 0;
        cl_int err;
        for (b = 0; b < 4; ++b)
            if (strcmp(tok, names[b]) == 0) { err = clSetKernelArg(k, i, sizeof(cl_mem), &bufs[b]); found = 1; }
        if (!found && tok[strlen(tok) - 1] == 'f') {
            cl_float v = strtof(tok, NULL);
            err = clSetKernelArg(k, i, sizeof v, &v);
        } else if (!found) {
            cl_int v = (cl_int)strtol(tok, NULL, 10);
            err = clSetKernelArg(k, i, sizeof v, &v);
        }
        if (err != CL_SUCCESS) return fail("clSetKernelArg", err);
    }
    return 0;
}

static int run(cl_device_id dev, const cltune_setting *s, const char *kernels, reference *ref, float *out) {
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    char *src = read_sources(kernels, s->sources);
    const char *srcs[1];
    cl_program prog;
    cl_mem bufs[4];
    int i;
    if (!src) return 2;
    srcs[0] = src;
    if (build_program(ctx, dev, srcs, s->options, &prog)) return 2;
    for (i = 0; i < 4; ++i) { /* x, w, b, out: the output starts as NaN, so an element nobody writes fails */
        size_t bytes = sizeof(float) * (size_t)(ref->n[i] ? ref->n[i] : 1);
        float *host = i == 3 ? out : ref->data[i];
        bufs[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, host, &err);
        if (err != CL_SUCCESS) return fail("clCreateBuffer", err);
    }
    for (i = 0; i < s->n_launches; ++i) {
        const cltune_launch *l = &s->launches[i];
        int local = l->local[0] || l->local[1] || l->local[2];
        cl_kernel k = clCreateKernel(prog, l->kernel, &err);
        if (err != CL_SUCCESS) return fail(l->kernel, err);
        if (set_args(k, l->args, bufs)) return 2;
        err = clEnqueueNDRangeKernel(q, k, l->work_dim, NULL, l->global, local ? l->local : NULL, 0, NULL, NULL);
        if (err != CL_SUCCESS) return fail("clEnqueueNDRangeKernel", err);
        clReleaseKernel(k);
    }
    err = clEnqueueReadBuffer(q, bufs[3], CL_TRUE, 0, sizeof(float) * (size_t)ref->n[3], out, 0, NULL, NULL);
    if (err != CL_SUCCESS) return fail("clEnqueueReadBuffer", err);
    for (i = 0; i < 4; ++i) clReleaseMemObject(bufs[i]);
    clReleaseProgram(prog);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    free(src);
    return 0;
}

static int check(const reference *ref, const float *out) {
    long i, bad = -1;
    double worst = 0;
    for (i = 0; i < ref->n[3]; ++i) {
        double want = ref->data[3][i], err = fabs((double)out[i] - want);
        if (!(err <= ref->atol + ref->rtol * fabs(want))) { if (bad < 0) bad = i; }
        else if (err > worst) worst = err;
    }
    if (bad >= 0) {
        printf("WRONG: output[%ld] = %g, expected %g\n", bad, (double)out[bad], (double)ref->data[3][bad]);
        return 1;
    }
    printf("answer: %ld outputs match the reference (max abs error %.3g)\n", ref->n[3], worst);
    return 0;
}

int main(int argc, char **argv) {
    const char *tuning = NULL, *as_device = NULL, *kernels = "kernels", *ref_path = NULL;
    int index = 0, i, rc, print_device = 0;
    char name[256];
    cl_device_id dev;
    reference ref;
    tuning_file tf;
    const cltune_setting *s;
    float *out;
    for (i = 1; i < argc; ++i) {
        if (i + 1 < argc && !strcmp(argv[i], "--tuning")) tuning = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--as-device")) as_device = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--kernels")) kernels = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--device")) index = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--print-device")) print_device = 1;
        else if (argv[i][0] != '-' && !ref_path) ref_path = argv[i];
        else { fprintf(stderr, "usage: %s [--tuning FILE.tsv] [--as-device NAME] [--device N] [--kernels DIR] REFERENCE\n", argv[0]); return 2; }
    }
    if (print_device) {
        if ((rc = pick_device(index, &dev, name))) return rc;
        printf("%s\n", name);
        return 0;
    }
    if (!ref_path) { fprintf(stderr, "usage: %s [options] REFERENCE (see the comment at the top)\n", argv[0]); return 2; }
    if (read_reference(ref_path, &ref) || (rc = pick_device(index, &dev, name))) return 2;
    printf("device: %s%s%s\n", name, as_device ? ", looked up as " : "", as_device ? as_device : "");
    printf("shape: %s\n", ref.problem);
    if (tuning && tuning_file_load(tuning, &tf)) return 2;
    s = tuning ? tuning_file_lookup(&tf, as_device ? as_device : name, ref.problem)
               : cltune_conv2d_lookup(as_device ? as_device : name, ref.problem);
    if (!s) { printf("no tuned or default setting for this device and shape: deploy it with --shape\n"); return 3; }
    printf("setting: %s (%s%s%s, from %s)\n", s->setting, s->match, *s->tuned_problem ? " of " : "",
           s->tuned_problem, tuning ? tuning : "cltune_conv2d.h");
    printf("options: %s\n", s->options);
    if (s->n_launches == 0) { fprintf(stderr, "error: this setting's launches need cltune's host code\n"); return 2; }
    out = malloc(sizeof(float) * (size_t)ref.n[3]);
    for (i = 0; i < ref.n[3]; ++i) out[i] = (float)NAN;
    if ((rc = run(dev, s, kernels, &ref, out))) return rc;
    return check(&ref, out);
}
