"""Published numbers of paper 003 (DC-QE), Tables 2 and 3, for side-by-side comparison.

Values are (estimate, bootstrap SE, gap, MASMD) as printed in the paper. Table 2: Experiment I
(synthetic, ATE, truth 1). Table 3: Experiment II (LaLonde NSW + PSID, ATT in $1000, benchmark
1.794). Keys: (setting, estimator) with our setting names.
"""

from __future__ import annotations

TABLE_2: dict[tuple[str, str], tuple[float, float, float, float]] = {
    ("L-IA", "psm"): (1.5992, 0.1966, 0.6306, 0.2714),
    ("L-clb", "psm"): (1.5862, 0.1352, 0.6016, 0.2508),
    ("T-clb", "psm"): (1.0840, 0.0960, 0.1275, 0.1097),
    ("W-clb", "psm"): (1.0628, 0.0664, 0.0914, 0.0790),
    ("CA", "psm"): (1.0711, 0.0724, 0.1015, 0.0744),
    ("L-IA", "ipw"): (1.4928, 0.2094, 0.5354, 0.2479),
    ("L-clb", "ipw"): (1.4943, 0.1432, 0.5146, 0.2372),
    ("T-clb", "ipw"): (0.9843, 0.1556, 0.1563, 0.0818),
    ("W-clb", "ipw"): (0.9805, 0.1091, 0.1108, 0.0603),
    ("CA", "ipw"): (0.9820, 0.1088, 0.1103, 0.0314),
}

TABLE_3: dict[tuple[str, str], tuple[float, float, float, float]] = {
    ("L-IA", "psm"): (-5.9910, 1.7841, 7.9870, 1.4280),
    ("R-IA", "psm"): (2.4057, 2.3567, 2.4336, 1.6169),
    ("L-clb", "psm"): (-5.8610, 1.2628, 7.7587, 1.3713),
    ("R-clb", "psm"): (2.4524, 1.6289, 1.7560, 1.4605),
    ("T-clb", "psm"): (1.4273, 1.4604, 1.5051, 0.3671),
    ("W-clb", "psm"): (1.4196, 0.9870, 1.0553, 0.3022),
    ("CA", "psm"): (1.3000, 1.1258, 1.2290, 0.2842),
    ("L-IA", "ipw"): (-5.9773, 1.2099, 7.8652, 1.3694),
    ("R-IA", "ipw"): (2.0710, 1.1110, 1.1444, 1.2722),
    ("L-clb", "ipw"): (-5.9188, 0.8732, 7.7624, 1.3603),
    ("R-clb", "ipw"): (2.0780, 0.7972, 0.8458, 1.2301),
    ("T-clb", "ipw"): (1.5931, 1.3337, 1.3481, 0.2844),
    ("W-clb", "ipw"): (1.6078, 0.9663, 0.9837, 0.2362),
    ("CA", "ipw"): (1.7320, 1.0190, 1.0204, 0.1777),
}
