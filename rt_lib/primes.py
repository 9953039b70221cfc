"""Primes, computed (never typed in): the miiii task has one head per prime q < p."""

from __future__ import annotations


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    i = 2
    while i * i <= n:
        if n % i == 0:
            return False
        i += 1
    return True


def primes_below(n: int) -> list[int]:
    """Every prime q < n, by the sieve of Eratosthenes."""
    if n < 3:
        return []
    sieve = bytearray([1]) * n
    sieve[0:2] = b"\x00\x00"
    for i in range(2, int(n**0.5) + 1):
        if sieve[i]:
            sieve[i * i :: i] = bytearray(len(range(i * i, n, i)))
    return [i for i in range(n) if sieve[i]]
