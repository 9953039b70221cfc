# Sourced by .ci/run: the settings under which the committed notebooks were recorded, forced
# whatever the CI environment holds (nbval compares outputs bit for bit): one torch thread per
# notebook, and scripts/kernel_env.sh's CPU kernels (it lets a value already set win, so any
# set here is cleared first).
export RT_THREADS=1
unset ATEN_CPU_CAPABILITY MKL_CBWR ONEDNN_MAX_CPU_ISA OPENBLAS_CORETYPE
