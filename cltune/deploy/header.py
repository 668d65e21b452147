"""The C header: a deployment as C99 tables and one lookup, `cltune_<name>_lookup(device_name,
problem_key)`, that returns the device's entry for the shape, else the default's, else NULL."""

from __future__ import annotations

import re

from ..core.errors import UserError

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

TYPES = """#ifndef CLTUNE_DEPLOY_TYPES
#define CLTUNE_DEPLOY_TYPES
typedef struct { const char *name; const char *value; } cltune_define;
/* One kernel enqueue: local all 0 means NULL (the driver chooses); args, space-separated in the
   kernel's argument order: buffer names (x w b out for conv; a kernel of your own: its arguments'
   names), ints, floats ending in f, and local:BYTES (a __local buffer of that size). */
typedef struct {
    const char *kernel; unsigned work_dim; size_t global[3]; size_t local[3]; const char *args;
} cltune_launch;
typedef struct {
    const char *device, *driver, *problem;
    const char *match;          /* "exact", "nearest" or "default" */
    const char *tuned_problem;  /* the shape a nearest entry was tuned on, else "" */
    const char *setting, *options;
    const char *sources;        /* kernel files, space-separated, joined with a newline between them */
    int n_defines; const cltune_define *defines;
    int n_launches; const cltune_launch *launches;  /* 0: the family plans its launches on a device */
} cltune_setting;
#endif
"""


def c_name(name: str, option: str = "--name") -> str:
    """`name` if it is a C identifier, else one line saying what to pass instead."""
    if not IDENT.match(name):
        raise UserError(f"{option} {name!r}: not a valid C identifier (letters, digits, _; not starting "
                        f"with a digit); choose one with {option}")
    return name


def c_string(s: str) -> str:
    """A C string literal: \\ " and ? escaped (? against trigraphs), anything but printable ASCII as
    octal bytes of its UTF-8."""
    out = []
    for c in s:
        if c in '\\"?':
            out.append("\\" + c)
        elif " " <= c <= "~":
            out.append(c)
        else:
            out.append("".join(f"\\{b:03o}" for b in c.encode()))
    return '"' + "".join(out) + '"'


def _entry(name: str, i: int, device: str, driver: str, e: dict) -> tuple[list[str], str]:
    """(the entry's defines and launches arrays, its initializer)."""
    arrays = []
    d_ref = l_ref = "NULL"
    if e["defines"]:
        items = ", ".join(f"{{{c_string(k)}, {c_string(v)}}}" for k, v in e["defines"].items())
        arrays.append(f"static const cltune_define cltune_{name}_defines_{i}[] = {{{items}}};")
        d_ref = f"cltune_{name}_defines_{i}"
    launches = e["launches"] or []
    if launches:
        items = []
        for ln in launches:
            g, loc = ln["global"], ln["local"] or []
            dims = lambda v: ", ".join(str(x) for x in (list(v) + [0, 0, 0])[:3])  # noqa: E731
            items.append(f"{{{c_string(ln['kernel'])}, {len(g)}, {{{dims(g)}}}, {{{dims(loc)}}}, "
                         f"{c_string(' '.join(ln['args']))}}}")
        arrays.append(f"static const cltune_launch cltune_{name}_launches_{i}[] = {{\n    "
                      + ",\n    ".join(items) + "};")
        l_ref = f"cltune_{name}_launches_{i}"
    fields = [c_string(device), c_string(driver), c_string(e["problem"]), c_string(e["match"]),
              c_string(e.get("tuned_problem", "")), c_string(e["setting"]), c_string(e["options"]),
              c_string(" ".join(e["sources"])), str(len(e["defines"])), d_ref, str(len(launches)), l_ref]
    return arrays, "{" + ", ".join(fields) + "}"


def _kt_names(deployment: dict) -> str:
    """C that makes device_name Kernel Tuner's form of it, for a deployment of KT results (whose
    device names are stored that way): each run of characters other than letters and digits one _,
    after trimming white space."""
    if deployment.get("device_names") != "kernel_tuner":
        return ""
    return r"""    char kt[256];
    size_t n = 0;
    const char *c = device_name, *end = device_name + strlen(device_name);
    while (c < end && (*c == ' ' || (*c >= '\t' && *c <= '\r'))) ++c;
    while (end > c && (end[-1] == ' ' || (end[-1] >= '\t' && end[-1] <= '\r'))) --end;
    for (; c < end && n < sizeof kt - 1; ++c) {
        int alnum = (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z');
        if (alnum) kt[n++] = *c;
        else if (n == 0 || kt[n - 1] != '_') kt[n++] = '_';
    }
    kt[n] = '\0';
    device_name = kt;
"""


def _lookup(name: str, deployment: dict) -> str:
    """The lookup function's C: the device's entry for the shape, else the default's, else NULL."""
    return f"""/* device_name: CL_DEVICE_NAME without leading and trailing white space, as cltune records it;
   problem: the shape's key, as in the results' problem column (n1_c8_h16_w16_k8_r3_s3_st1x1_p1x1_d1x1_g1). */
static inline const cltune_setting *cltune_{name}_lookup(const char *device_name, const char *problem) {{
    int i;
{_kt_names(deployment)}    for (i = 0; i < cltune_{name}_n_tuned; ++i)
        if (strcmp(cltune_{name}_settings[i].device, device_name) == 0
            && strcmp(cltune_{name}_settings[i].problem, problem) == 0)
            return &cltune_{name}_settings[i];
    for (i = cltune_{name}_n_tuned; i < cltune_{name}_n_settings; ++i)
        if (strcmp(cltune_{name}_settings[i].problem, problem) == 0)
            return &cltune_{name}_settings[i];
    return NULL;
}}
"""


def to_header(deployment: dict, name: str) -> str:
    """The header's text for a deployment (one kernel), its symbols prefixed cltune_<name>_."""
    c_name(name)
    guard = f"CLTUNE_{name.upper()}_H"
    rows = [(d["device"], d["driver"], e) for d in deployment["devices"] for e in d["entries"]]
    rows += [("", "", e) for e in deployment["default"]["entries"]]  # the default: device ""
    arrays, inits = [], []
    for i, (device, driver, e) in enumerate(rows):
        a, init = _entry(name, i, device, driver, e)
        arrays += a
        inits.append(init)
    n_devices = len(rows) - len(deployment["default"]["entries"])
    kernel = re.sub(r"[^\w.:=,\[\] -]", "_", deployment["kernel"])  # nothing that could end the comment
    return f"""/* {name}: tuned settings of kernel {kernel} per device and shape, written by
   {deployment['generator']} (cltune deploy; JSON schema {deployment['schema_version']}). Do not edit: deploy again.
   Lookup: the device's entry for the shape (exact, or nearest tuned shape), else the default for
   devices nobody tuned (rule: {deployment['default']['rule']}), else NULL. docs/deploy.md */
#ifndef {guard}
#define {guard}

#include <stddef.h>
#include <string.h>

{TYPES}
{chr(10).join(arrays)}

static const cltune_setting cltune_{name}_settings[] = {{
    {(',' + chr(10) + '    ').join(inits) if inits else '{NULL}'}
}};
enum {{ cltune_{name}_n_tuned = {n_devices}, cltune_{name}_n_settings = {len(rows)} }};

{_lookup(name, deployment)}
#endif /* {guard} */
"""
