/* An app's side of cltune deploy for a kernel of your own ([kernel] config), in plain C99 against the
   OpenCL C API: read the device's name, pick the tuned setting from cltune_<NAME>.h (or, with --tuning,
   from the flat tuning file), build the kernel's source with its options, set its arguments (buffers
   from a reference file written by `cltune reference CONFIG.toml`), run it with the tuned global and
   local sizes and check every output. Exit 0: right answer; 1: wrong answer; 2: usage, input or
   OpenCL error; 3: no setting for this device and problem.

   build:  cc -std=c99 -DCLTUNE_NAME=sgemm -I DEPLOY_DIR deploy_kernel.c tuning_file.c -lOpenCL -lm
   usage:  deploy_kernel [--tuning FILE.tsv] [--as-device NAME] [--device N] [--kernels DIR] REFERENCE */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuning_file.h" /* and cltune_<CLTUNE_NAME>.h */

#ifndef CLTUNE_NAME
#error "build with -DCLTUNE_NAME=<name>: the <name> of the cltune_<name>.h that cltune deploy wrote"
#endif
#define LOOKUP_(n) cltune_##n##_lookup
#define LOOKUP(n) LOOKUP_(n)

#define MAX_BUFFERS 32

typedef struct {
    char name[64], dtype[16];
    long n;
    int checked;
    double rtol, atol;
    void *init;      /* n float or cl_int values */
    double *expect;  /* n expected values when checked */
} buffer;

typedef struct { char problem[256]; int n; buffer b[MAX_BUFFERS]; } reference;

static int read_values(FILE *fh, buffer *b, void *into, double *as_double) {
    long j;
    for (j = 0; j < b->n; ++j) {
        double v;
        if (fscanf(fh, "%lf", &v) != 1) return -1;
        if (as_double) as_double[j] = v;
        else if (b->dtype[0] == 'f') ((cl_float *)into)[j] = (cl_float)v;
        else ((cl_int *)into)[j] = (cl_int)v;
    }
    return 0;
}

static int read_reference(const char *path, reference *ref) {
    char magic[64];
    int version, i;
    FILE *fh = fopen(path, "r");
    if (!fh) { fprintf(stderr, "error: %s: cannot open\n", path); return -1; }
    if (fscanf(fh, "%63s %d problem %255s buffers %d", magic, &version, ref->problem, &ref->n) != 4 ||
        strcmp(magic, "cltune-kernel-reference") || version != 1 || ref->n < 0 || ref->n > MAX_BUFFERS) {
        fprintf(stderr, "error: %s: not a cltune kernel reference file (version 1)\n", path);
        fclose(fh);
        return -1;
    }
    for (i = 0; i < ref->n; ++i) {
        buffer *b = &ref->b[i];
        if (fscanf(fh, " buffer %63s %15s %ld %d %lf %lf", b->name, b->dtype, &b->n, &b->checked, &b->rtol, &b->atol) != 6 ||
            b->n < 0 || (strcmp(b->dtype, "float32") && strcmp(b->dtype, "int32"))) break;
        b->init = malloc(4 * (size_t)(b->n ? b->n : 1));
        b->expect = b->checked ? malloc(sizeof(double) * (size_t)(b->n ? b->n : 1)) : NULL;
        if (read_values(fh, b, b->init, NULL) || (b->checked && read_values(fh, b, NULL, b->expect))) break;
    }
    fclose(fh);
    if (i < ref->n) { fprintf(stderr, "error: %s: buffer %d is cut short or malformed\n", path, i + 1); return -1; }
    return 0;
}

/* Each space-separated argument: local:BYTES, a buffer by its name, a float ending in f, an int. */
static int set_args(cl_kernel k, const char *args, const reference *ref, cl_mem *bufs) {
    char list[4096], *tok;
    cl_uint i = 0;
    strncpy(list, args, sizeof list - 1);
    list[sizeof list - 1] = '\0';
    for (tok = strtok(list, " "); tok; tok = strtok(NULL, " "), ++i) {
        int b;
        cl_int err;
        for (b = 0; b < ref->n && strcmp(tok, ref->b[b].name); ++b) {}
        if (strncmp(tok, "local:", 6) == 0) {
            err = clSetKernelArg(k, i, (size_t)strtoul(tok + 6, NULL, 10), NULL);
        } else if (b < ref->n) {
            err = clSetKernelArg(k, i, sizeof(cl_mem), &bufs[b]);
        } else if (isalpha((unsigned char)tok[0]) || tok[0] == '_') {
            fprintf(stderr, "error: argument %s: no such buffer in the reference file\n", tok);
            return 2;
        } else if (tok[strlen(tok) - 1] == 'f') {
            cl_float v = strtof(tok, NULL);
            err = clSetKernelArg(k, i, sizeof v, &v);
        } else {
            cl_int v = (cl_int)strtol(tok, NULL, 10);
            err = clSetKernelArg(k, i, sizeof v, &v);
        }
        if (err != CL_SUCCESS) return fail("clSetKernelArg", err);
    }
    return 0;
}

/* Build, launch, and read every checked buffer back into out[b]. */
static int run(cl_device_id dev, const cltune_setting *s, const char *kernels, const reference *ref, void **out) {
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    char *src = read_sources(kernels, s->sources);
    const char *srcs[1];
    cl_program prog;
    cl_mem bufs[MAX_BUFFERS];
    int i;
    if (!src) return 2;
    srcs[0] = src;
    if (build_program(ctx, dev, srcs, s->options, &prog)) return 2;
    for (i = 0; i < ref->n; ++i) {
        bufs[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, 4 * (size_t)(ref->b[i].n ? ref->b[i].n : 1),
                                 ref->b[i].init, &err);
        if (err != CL_SUCCESS) return fail("clCreateBuffer", err);
    }
    for (i = 0; i < s->n_launches; ++i) {
        const cltune_launch *l = &s->launches[i];
        int local = l->local[0] || l->local[1] || l->local[2];
        cl_kernel k = clCreateKernel(prog, l->kernel, &err);
        if (err != CL_SUCCESS) return fail(l->kernel, err);
        if (set_args(k, l->args, ref, bufs)) return 2;
        err = clEnqueueNDRangeKernel(q, k, l->work_dim, NULL, l->global, local ? l->local : NULL, 0, NULL, NULL);
        if (err != CL_SUCCESS) return fail("clEnqueueNDRangeKernel", err);
        clReleaseKernel(k);
    }
    for (i = 0; i < ref->n; ++i) {
        if (ref->b[i].checked && (out[i] = malloc(4 * (size_t)(ref->b[i].n ? ref->b[i].n : 1))) != NULL) {
            err = clEnqueueReadBuffer(q, bufs[i], CL_TRUE, 0, 4 * (size_t)ref->b[i].n, out[i], 0, NULL, NULL);
            if (err != CL_SUCCESS) return fail("clEnqueueReadBuffer", err);
        }
        clReleaseMemObject(bufs[i]);
    }
    clReleaseProgram(prog);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    free(src);
    return 0;
}

/* Every checked buffer against its expected values: floats within atol + rtol * |expected|, ints equal. */
static int check(const reference *ref, void **out) {
    int b, rc = 0;
    for (b = 0; b < ref->n; ++b) {
        const buffer *r = &ref->b[b];
        long i, bad = -1;
        double worst = 0;
        for (i = 0; r->checked && i < r->n; ++i) {
            double got = r->dtype[0] == 'f' ? (double)((cl_float *)out[b])[i] : (double)((cl_int *)out[b])[i];
            double err = fabs(got - r->expect[i]);
            if (!(err <= r->atol + r->rtol * fabs(r->expect[i]))) { if (bad < 0) bad = i; }
            else if (err > worst) worst = err;
        }
        if (!r->checked) continue;
        if (bad >= 0) {
            double got = r->dtype[0] == 'f' ? (double)((cl_float *)out[b])[bad] : (double)((cl_int *)out[b])[bad];
            printf("WRONG: %s[%ld] = %g, expected %g\n", r->name, bad, got, r->expect[bad]);
            rc = 1;
        } else {
            printf("answer: %s: %ld values match the reference (max abs error %.3g)\n", r->name, r->n, worst);
        }
    }
    return rc;
}

int main(int argc, char **argv) {
    const char *tuning = NULL, *as_device = NULL, *kernels = ".", *ref_path = NULL;
    int index = 0, i, rc;
    char name[256];
    cl_device_id dev = NULL;
    static reference ref;
    void *out[MAX_BUFFERS] = {0};
    tuning_file tf;
    const cltune_setting *s;
    for (i = 1; i < argc; ++i) {
        if (i + 1 < argc && !strcmp(argv[i], "--tuning")) tuning = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--as-device")) as_device = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--kernels")) kernels = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--device")) index = atoi(argv[++i]);
        else if (argv[i][0] != '-' && !ref_path) ref_path = argv[i];
        else { fprintf(stderr, "usage: %s [--tuning FILE.tsv] [--as-device NAME] [--device N] [--kernels DIR] REFERENCE\n", argv[0]); return 2; }
    }
    if (!ref_path) { fprintf(stderr, "usage: %s [options] REFERENCE (see the comment at the top)\n", argv[0]); return 2; }
    if (read_reference(ref_path, &ref) || (rc = pick_device(index, &dev, name))) return 2;
    printf("device: %s%s%s\n", name, as_device ? ", looked up as " : "", as_device ? as_device : "");
    printf("problem: %s\n", ref.problem);
    if (tuning && tuning_file_load(tuning, &tf)) return 2;
    s = tuning ? tuning_file_lookup(&tf, as_device ? as_device : name, ref.problem)
               : LOOKUP(CLTUNE_NAME)(as_device ? as_device : name, ref.problem);
    if (!s) { printf("no tuned or default setting for this device and problem: tune it and deploy again\n"); return 3; }
    printf("setting: %s (%s, from %s)\n", s->setting, s->match, tuning ? tuning : CLTUNE_HEADER(CLTUNE_NAME));
    printf("options: %s\n", s->options);
    if (s->n_launches == 0) { fprintf(stderr, "error: no launch sizes: deploy with --config CONFIG.toml\n"); return 2; }
    for (i = 0; i < s->n_launches; ++i) {
        const cltune_launch *l = &s->launches[i];
        unsigned d;
        printf("launch: %s global", l->kernel);
        for (d = 0; d < l->work_dim; ++d) printf("%c%lu", d ? ',' : ' ', (unsigned long)l->global[d]);
        printf(" local");
        for (d = 0; d < l->work_dim; ++d) printf("%c%lu", d ? ',' : ' ', (unsigned long)l->local[d]);
        printf("\n");
    }
    if ((rc = run(dev, s, kernels, &ref, out))) return rc;
    return check(&ref, out);
}
