"""Deprecated: moved to `xpgym.envs.common.datasets`."""

from xpgym.envs.common.deprecation import moved_names

__getattr__ = moved_names(
    __name__,
    dict.fromkeys(
        [
            "DATA_FILE_BUILDERS",
            "DataFiles",
            "DatasetLoadError",
            "DatasetSchemaError",
            "check_table",
            "describe_source",
            "load_records",
            "load_split",
            "pick_index",
        ],
        "xpgym.envs.common.datasets",
    ),
)
