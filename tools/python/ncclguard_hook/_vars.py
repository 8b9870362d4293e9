# Generated from shim/vars.def by genvars --py (make): do not edit. Read by _config.py.
BOOL_TRUE = ("1", "true", "yes", "on", )
BOOL_FALSE = ("0", "false", "no", "off", )
INT_RE = "^-?[0-9]+$"
NUM_RE = "^([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$"
BAD_VALUE_FMT = "%s=%.60s is not valid (expected %s); using the default %s"
REFUSED_VALUE_FMT = "%s=%.60s is not valid (expected %s)"
REFUSED_VAR_FMT = "%.60s is not an ncclguard variable (did you mean %s?)"
PATH_MAX = 4096
# name: (kind, default as text (in parentheses: what unset means), min, max, choices,
#        what a valid value looks like)
VARS = {
    "NCCLGUARD_LOG": ("ENUM", "warn", 0, 0, ("off", "warn", "info", "trace", ), "off|warn|info|trace"),
    "NCCLGUARD_LOG_FILE": ("PATH", "stderr", 0, 0, (), "a path shorter than PATH_MAX"),
    "NCCLGUARD_LOG_FORMAT": ("ENUM", "text", 0, 0, ("text", "json", ), "text|json"),
    "NCCLGUARD_LOG_MAX_MB": ("INT", "256", 0, 1073741824, (), "an integer in [0, 1073741824]"),
    "NCCLGUARD_ON_FAILURE": ("ENUM", "degrade", 0, 0, ("degrade", "error", ), "degrade|error"),
    "NCCLGUARD_WARMUP": ("ENUM", "auto", 0, 0, ("auto", "always", "never", ), "auto|always|never"),
    "NCCLGUARD_WINDOW_BUDGET": ("NUM", "0", 0, 1e+18, (), "a number in [0, 1e+18]"),
    "NCCLGUARD_RETRIES": ("INT", "3", 0, 100, (), "an integer in [0, 100]"),
    "NCCLGUARD_TIMEOUT": ("NUM", "600", 0.001, 10000000, (), "a number in [0.001, 10000000]"),
    "NCCLGUARD_AGREE": ("BOOL", "1", 0, 0, (), "1/0, true/false, yes/no or on/off"),
    "NCCLGUARD_PREFLIGHT": ("BOOL", "1", 0, 0, (), "1/0, true/false, yes/no or on/off"),
    "NCCLGUARD_NULL_WINDOW": ("ENUM", "warn", 0, 0, ("warn", "error", ), "warn|error"),
    "NCCLGUARD_CAPTURE": ("ENUM", "relaxed", 0, 0, ("degrade", "relaxed", ), "degrade|relaxed"),
    "NCCLGUARD_MEMALLOC_CLEAR": ("BOOL", "1", 0, 0, (), "1/0, true/false, yes/no or on/off"),
    "NCCLGUARD_STATS": ("BOOL", "0", 0, 0, (), "1/0, true/false, yes/no or on/off"),
    "NCCLGUARD_DUMP_CONFIG": ("BOOL", "0", 0, 0, (), "1/0, true/false, yes/no or on/off"),
    "NCCLGUARD_DISABLE": ("BOOL", "0", 0, 0, (), "1/0, true/false, yes/no or on/off"),
    "NCCLGUARD_NCCL_LIB": ("PATH", "(auto)", 0, 0, (), "a path shorter than PATH_MAX"),
    "NCCLGUARD_DLSYM": ("BOOL", "1", 0, 0, (), "1/0, true/false, yes/no or on/off"),
    "NCCLGUARD_CUDA_LIB": ("PATH", "libcuda.so.1", 0, 0, (), "a path shorter than PATH_MAX"),
    "NCCLGUARD_PYHOOK": ("BOOL", "1", 0, 0, (), "1/0, true/false, yes/no or on/off"),
    "NCCLGUARD_LIB": ("PATH", "(found by ncclguard-run)", 0, 0, (), "a path shorter than PATH_MAX"),
    "NCCLGUARD_STRICT": ("BOOL", "1", 0, 0, (), "1/0, true/false, yes/no or on/off"),
    "NCCLGUARD": ("BOOL", "(off; import ncclguard turns it on)", 0, 0, (), "1/0, true/false, yes/no or on/off"),
}
