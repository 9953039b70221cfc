# Sourced by .ci/run: the settings under which the committed notebooks were recorded, forced
# whatever the CI environment holds (nbval compares outputs bit for bit): one torch thread per
# notebook, and scripts/kernel_env.sh's CPU kernels (it lets a value already set win, so any
# set here is cleared first).
# Nothing left to skip unseen: the smoke runs run (RT_TEST_SMOKE=0 would leave them out), the
# figure tests compare (RT_REGENERATE_FIGURES=1 would rewrite the baselines and skip), the
# TinyStories tests fail without the data instead of skipping; RT_PLATFORM is chosen by the
# fingerprint (rt_lib/runtime/fingerprint.py), never inherited.
export RT_THREADS=1
export RT_REQUIRE_DATA=1
unset ATEN_CPU_CAPABILITY MKL_CBWR ONEDNN_MAX_CPU_ISA OPENBLAS_CORETYPE
unset RT_TEST_SMOKE RT_REGENERATE_FIGURES RT_PLATFORM
