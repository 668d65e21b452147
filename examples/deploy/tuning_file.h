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

#endif
