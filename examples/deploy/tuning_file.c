/* The flat tuning file (cltune deploy's cltune_<name>.tsv) read into cltune_setting entries, and the
   header's lookup rule applied to them: the device's entry for the shape, else the default's ("*"). */
#include "tuning_file.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *copy(const char *s) {
    char *out = malloc(strlen(s) + 1);
    if (out) strcpy(out, s);
    return out;
}

/* The next tab-separated field of *line (the line itself is cut at each tab). */
static char *field(char **line) {
    char *start = *line, *tab = strchr(start, '\t');
    if (tab) { *tab = '\0'; *line = tab + 1; } else { *line = start + strlen(start); }
    return start;
}

/* kernel|g0,g1,g2|l0,l1,l2|args;... -> launches; the count, or -1 when malformed. */
static int parse_launches(char *text, cltune_launch **out) {
    int n = 0, cap = 4;
    cltune_launch *ls = calloc((size_t)cap, sizeof *ls);
    char *save = text;
    while (ls && *save) {
        char *item = save, *semi = strchr(item, ';'), *k, *g, *l, *a;
        unsigned long g3[3], l3[3];
        if (semi) { *semi = '\0'; save = semi + 1; } else { save = item + strlen(item); }
        k = item; g = strchr(k, '|'); if (!g) return -1; *g++ = '\0';
        l = strchr(g, '|'); if (!l) return -1; *l++ = '\0';
        a = strchr(l, '|'); if (!a) return -1; *a++ = '\0';
        if (sscanf(g, "%lu,%lu,%lu", &g3[0], &g3[1], &g3[2]) != 3) return -1;
        if (sscanf(l, "%lu,%lu,%lu", &l3[0], &l3[1], &l3[2]) != 3) return -1;
        if (n == cap && !(ls = realloc(ls, (size_t)(cap *= 2) * sizeof *ls))) return -1;
        ls[n].kernel = copy(k);
        ls[n].work_dim = g3[2] ? 3 : g3[1] ? 2 : 1;
        ls[n].global[0] = g3[0]; ls[n].global[1] = g3[1]; ls[n].global[2] = g3[2];
        ls[n].local[0] = l3[0]; ls[n].local[1] = l3[1]; ls[n].local[2] = l3[2];
        ls[n].args = copy(a);
        ++n;
    }
    *out = ls;
    return ls ? n : -1;
}

int tuning_file_load(const char *path, tuning_file *tf) {
    char line[65536];
    int lineno = 0;
    FILE *fh = fopen(path, "r");
    tf->n = 0;
    tf->entries = NULL;
    if (!fh) { fprintf(stderr, "%s: cannot open\n", path); return -1; }
    while (fgets(line, sizeof line, fh)) {
        char *rest = line, *nl = strchr(line, '\n');
        cltune_setting *e;
        cltune_launch *launches = NULL;
        ++lineno;
        if (nl) *nl = '\0';
        if (line[0] == '#' || line[0] == '\0') continue;
        if (!(tf->entries = realloc(tf->entries, (size_t)(tf->n + 1) * sizeof *tf->entries))) break;
        e = &tf->entries[tf->n];
        memset(e, 0, sizeof *e);
        e->device = copy(field(&rest)); e->driver = copy(field(&rest)); e->problem = copy(field(&rest));
        e->match = copy(field(&rest)); e->tuned_problem = copy(field(&rest)); e->setting = copy(field(&rest));
        e->options = copy(field(&rest)); e->sources = copy(field(&rest));
        e->n_launches = parse_launches(field(&rest), &launches);
        e->launches = launches;
        if (e->n_launches < 0 || !*e->problem) {
            fprintf(stderr, "%s:%d: not a line of a cltune tuning file\n", path, lineno);
            fclose(fh);
            return -1;
        }
        ++tf->n;
    }
    fclose(fh);
    return 0;
}

const cltune_setting *tuning_file_lookup(const tuning_file *tf, const char *device_name, const char *problem) {
    int i;
    for (i = 0; i < tf->n; ++i)
        if (strcmp(tf->entries[i].device, device_name) == 0 && strcmp(tf->entries[i].problem, problem) == 0)
            return &tf->entries[i];
    for (i = 0; i < tf->n; ++i)
        if (strcmp(tf->entries[i].device, "*") == 0 && strcmp(tf->entries[i].problem, problem) == 0)
            return &tf->entries[i];
    return NULL;
}

/* Host helpers both example programs use. */

int fail(const char *what, cl_int err) {
    fprintf(stderr, "error: %s (OpenCL error %d)\n", what, (int)err);
    return 2;
}

/* The kernel files of the setting, each read from dir, joined with a newline (as cltune builds them). */
char *read_sources(const char *dir, const char *sources) {
    char list[1024], path[2048], *name, *out = calloc(1, 1);
    size_t len = 0;
    strncpy(list, sources, sizeof list - 1);
    list[sizeof list - 1] = '\0';
    for (name = strtok(list, " "); name && out; name = strtok(NULL, " ")) {
        FILE *fh;
        long size;
        snprintf(path, sizeof path, "%s/%s", dir, name);
        if (!(fh = fopen(path, "rb"))) { fprintf(stderr, "error: %s: cannot open (see --kernels)\n", path); free(out); return NULL; }
        fseek(fh, 0, SEEK_END);
        size = ftell(fh);
        rewind(fh);
        out = realloc(out, len + (size_t)size + 2);
        len += fread(out + len, 1, (size_t)size, fh);
        out[len++] = '\n';
        out[len] = '\0';
        fclose(fh);
    }
    if (out && len) out[len - 1] = '\0'; /* no newline after the last file */
    return out;
}

/* The flat index's device over every platform, and its name without surrounding white space. */
int pick_device(int index, cl_device_id *dev, char name[256]) {
    cl_platform_id plats[16];
    cl_uint np = 0, p;
    char *start, *end;
    if (clGetPlatformIDs(16, plats, &np) != CL_SUCCESS || np == 0) { fprintf(stderr, "error: no OpenCL platform\n"); return 2; }
    for (p = 0; p < np; ++p) {
        cl_device_id devs[16];
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 16, devs, &nd) != CL_SUCCESS) continue;
        if (index < (int)nd) { *dev = devs[index]; break; }
        index -= (int)nd;
    }
    if (p == np) { fprintf(stderr, "error: no OpenCL device of that index (--device)\n"); return 2; }
    clGetDeviceInfo(*dev, CL_DEVICE_NAME, 255, name, NULL);
    name[255] = '\0';
    for (start = name; isspace((unsigned char)*start); ++start) {}
    memmove(name, start, strlen(start) + 1);
    for (end = name + strlen(name); end > name && isspace((unsigned char)end[-1]); --end) end[-1] = '\0';
    return 0;
}

int build_program(cl_context ctx, cl_device_id dev, const char **srcs, const char *options, cl_program *prog) {
    cl_int err;
    *prog = clCreateProgramWithSource(ctx, 1, srcs, NULL, &err);
    if (err != CL_SUCCESS) return fail("clCreateProgramWithSource", err);
    if ((err = clBuildProgram(*prog, 1, &dev, options, NULL, NULL)) != CL_SUCCESS) {
        char log[4096] = "";
        clGetProgramBuildInfo(*prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
        fprintf(stderr, "build log: %.300s\n", log);
        return fail("clBuildProgram", err);
    }
    return 0;
}
