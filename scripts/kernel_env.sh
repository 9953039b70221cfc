# Sourced by run_all.sh and run_tests.sh: the same CPU kernels on every x86 machine, so that a
# notebook recorded on one machine reproduces its outputs bit for bit on another (nbval compares
# them).  Without these, torch picks its AVX-512 kernels and MKL its own code path where the CPU
# has them, and reductions in another order change a trained model's last digits, which a long
# training run can grow into a different accuracy.  AVX2 is what the project's machines have; a
# value already set in the environment wins.
export ATEN_CPU_CAPABILITY="${ATEN_CPU_CAPABILITY:-avx2}"
export MKL_CBWR="${MKL_CBWR:-AVX2}"
export ONEDNN_MAX_CPU_ISA="${ONEDNN_MAX_CPU_ISA:-AVX2}"
