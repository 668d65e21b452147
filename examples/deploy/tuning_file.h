/* The flat tuning file that cltune deploy writes beside the JSON (cltune_<name>.tsv), read at run
   time: the same entries and lookup rule as the generated header. */
#ifndef TUNING_FILE_H
#define TUNING_FILE_H

/* cltune_setting, cltune_launch: from the generated header cltune_<CLTUNE_NAME>.h (cc -DCLTUNE_NAME=sgemm
   for a kernel of your own), else cltune_conv2d.h */
#define CLTUNE_STR_(x) #x
#define CLTUNE_STR(x) CLTUNE_STR_(x)
#define CLTUNE_HEADER_(n) CLTUNE_STR(cltune_##n.h)
#define CLTUNE_HEADER(n) CLTUNE_HEADER_(n)
#ifdef CLTUNE_NAME
#include CLTUNE_HEADER(CLTUNE_NAME)
#else
#include "cltune_conv2d.h"
#endif

typedef struct { int n; cltune_setting *entries; } tuning_file;

/* 0, or -1 after printing one line naming the file (and line) that could not be read. */
int tuning_file_load(const char *path, tuning_file *tf);
const cltune_setting *tuning_file_lookup(const tuning_file *tf, const char *device_name, const char *problem);

/* Host helpers shared by deploy_conv2d.c and deploy_kernel.c. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
/* 2 after printing one line naming the OpenCL call and its error code. */
int fail(const char *what, cl_int err);
/* The kernel files of a setting (space-separated), each read from dir, joined with a newline; NULL after one line. */
char *read_sources(const char *dir, const char *sources);
/* The flat index's device over every platform, and its name without surrounding white space; 0 or 2. */
int pick_device(int index, cl_device_id *dev, char name[256]);
/* The source built for dev with options; 0, or 2 after the build log's start and one line. */
int build_program(cl_context ctx, cl_device_id dev, const char **srcs, const char *options, cl_program *prog);

#endif
