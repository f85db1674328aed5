"""Sharing the server's seats among priority levels that lend and borrow (kube's
conc_alloc.go): given each level's bounds and target, the allocations that sum to the
server's total, each the same fraction ("fair fraction") of its target unless a bound stops it.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_TARGET = 0.001
EPSILON = 1e-7


@dataclass(frozen=True)
class AllocItem:
    target: float
    lower: float
    upper: float


class AllocationError(ValueError):
    pass


def allocate(required: int, items: list[AllocItem]) -> tuple[list[float], float]:
    """(allocations, fair fraction): ``allocations[i]`` is ``fraction * target[i]`` clipped to
    ``[lower[i], upper[i]]``, and they sum to ``required``; AllocationError when the bounds
    make that impossible."""
    if required < 0:
        raise AllocationError("negative sums are not supported")
    low_sum = high_sum = target_sum = 0.0
    targets, rel_lower, rel_upper = [], [], []
    for index, item in enumerate(items):
        if item.lower < 0:
            raise AllocationError(f"lower bound {index} is {item.lower} but negative lower "
                                  "bounds are not allowed")
        if item.target < item.lower:
            raise AllocationError(f"target {index} is {item.target}, which is below its lower "
                                  f"bound of {item.lower}")
        if item.upper < item.lower:
            raise AllocationError(f"upper bound {index} is {item.upper} but should not be less "
                                  f"than the lower bound {item.lower}")
        target = max(item.target, MIN_TARGET)
        low_sum += item.lower
        high_sum += item.upper
        target_sum += target
        targets.append(target)
        rel_lower.append(item.lower / target)
        rel_upper.append(item.upper / target)
    if low_sum - required > EPSILON:
        raise AllocationError(f"lower bounds sum to {low_sum}, which is higher than the "
                              f"required sum of {required}")
    if required - high_sum > EPSILON:
        raise AllocationError(f"upper bounds sum to {high_sum}, which is lower than the "
                              f"required sum of {required}")
    if required == 0:
        return [0.0] * len(items), 0.0
    if not items:
        raise AllocationError("nothing to allocate to")
    if low_sum - required > -EPSILON:  # no room: every level at its lower bound
        return [item.lower for item in items], min(rel_lower)
    if required - high_sum > -EPSILON:  # no room: every level at its upper bound
        return [item.upper for item in items], max(rel_upper)
    fraction = required / target_sum
    if max(rel_lower) <= fraction <= min(rel_upper):  # no bound matters
        return [target * fraction for target in targets], fraction
    # Some bound matters: raise the fraction from the smallest relative bound, passing the
    # bounds in order; between two bounds the sum grows with the targets of the levels
    # whose allocation is not clipped (those past their lower bound, not yet at their upper).
    bounds = sorted([(b, i, True) for i, b in enumerate(rel_lower)]
                    + [(b, i, False) for i, b in enumerate(rel_upper)], key=lambda t: t[0])
    total = low_sum
    fraction = bounds[0][0]
    sensitive = 0.0
    position = 0
    while total < required:
        while position < len(bounds) and bounds[position][0] <= fraction:
            _, index, lower = bounds[position]
            sensitive += targets[index] if lower else -targets[index]
            position += 1
        next_bound = bounds[position][0] if position < len(bounds) else None
        if sensitive <= EPSILON * EPSILON:
            if next_bound is None:
                raise AllocationError("impossible: ran out of bounds to consider in "
                                      "bound-constrained problem")
            fraction = next_bound
            continue
        step = fraction + (required - total) / sensitive
        if next_bound is None or step <= next_bound:
            fraction = step
            break
        total += (next_bound - fraction) * sensitive
        fraction = next_bound
    allocations = [max(item.lower, min(item.upper, fraction * target))
                   for item, target in zip(items, targets, strict=True)]
    return allocations, fraction
