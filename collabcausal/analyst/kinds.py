"""The study kinds: ``[study] kind`` of study.toml, ``collabcausal simulate KIND`` (no imports: a fast ``--help``)."""

KINDS = ("dcqe", "adum", "cate", "discovery", "dp_effects")
