# Sourced by run_all.sh and run_tests.sh: the same CPU kernels on every x86 machine, so that a
# notebook recorded on one machine reproduces its outputs bit for bit on another (nbval compares
# them).  Without these, torch picks its AVX-512 kernels and MKL its own code path where the CPU
# has them, and reductions in another order change a trained model's last digits, which a long
# training run (notebook 11's 10,000 epochs) grows into a different accuracy.  On an AVX2-only
# machine they change nothing (notebooks 04 and 11 gave identical outputs with and without).
# A value already set in the environment wins.
export ATEN_CPU_CAPABILITY="${ATEN_CPU_CAPABILITY:-avx2}"
# MKL's AVX2 path is the recording's (an AMD EPYC).  An Intel CPU's MKL parts from the recording
# whatever this is set to (docs/reliability.md), and there the pin costs 1.1-1.6x per step
# (benchmarks/before_after.py now, with and without): leave MKL its own path on Intel.
# RT_CPUINFO: another cpuinfo file to read the vendor from (the tests).
cpu_vendor="$(grep -m1 '^vendor_id' "${RT_CPUINFO:-/proc/cpuinfo}" 2>/dev/null | awk '{print $NF}')"
if [ "$cpu_vendor" != GenuineIntel ]; then
  export MKL_CBWR="${MKL_CBWR:-AVX2}"
fi
unset cpu_vendor
export ONEDNN_MAX_CPU_ISA="${ONEDNN_MAX_CPU_ISA:-AVX2}"
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-Haswell}"  # numpy's OpenBLAS (SVD, PCA): its AVX2 kernels
