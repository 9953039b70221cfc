"""Tasks: one interface (:class:`Task`), one constructor per experiment."""

from rt_lib.primes import is_prime, primes_below
from rt_lib.tasks.base import IGNORE, Batch, FiniteTask, StreamTask, Task, split_indices
from rt_lib.tasks.decimal import DecimalAddition
from rt_lib.tasks.dyck import Parentheses
from rt_lib.tasks.imitation import CircuitImitation, imitation_target
from rt_lib.tasks.language import LanguageModelling
from rt_lib.tasks.modular import modular_addition
from rt_lib.tasks.needle import NeedleInAHaystack
from rt_lib.tasks.random_labels import MemorisationTask, bits_memorised, bits_net_of_chance, memorisation

__all__ = ["IGNORE", "Batch", "FiniteTask", "StreamTask", "NeedleInAHaystack", "DecimalAddition", "Parentheses",
           "CircuitImitation", "imitation_target", "LanguageModelling",
           "MemorisationTask", "memorisation", "bits_memorised", "bits_net_of_chance", "Task", "split_indices",
           "modular_addition",
           "is_prime", "primes_below"]
