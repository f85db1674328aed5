"""Shuffle sharding (k8s.io/apimachinery pkg/util/shufflesharding): a flow's hash picks a hand of
distinct queues out of the deck, so that two flows rarely share all their queues and one heavy
flow can fill only the queues of its own hand.
"""

from __future__ import annotations

import math

MAX_HASH_BITS = 60


def required_entropy_bits(deck: int, hand: int) -> int:
    return math.ceil(math.log2(deck) * hand)


class Dealer:
    """Deals hands of ``hand`` cards from a deck of ``deck`` cards."""

    __slots__ = ("deck", "hand")

    def __init__(self, deck: int, hand: int) -> None:
        if deck <= 0 or hand <= 0:
            raise ValueError(f"deckSize {deck} or handSize {hand} is not positive")
        if hand > deck:
            raise ValueError(f"handSize {hand} is greater than deckSize {deck}")
        if deck > 1 << 26:
            raise ValueError(f"deckSize {deck} is impractically large")
        if required_entropy_bits(deck, hand) > MAX_HASH_BITS:
            raise ValueError(f"required entropy bits of deckSize {deck} and handSize {hand} "
                             f"is greater than {MAX_HASH_BITS}")
        self.deck, self.hand = deck, hand

    def deal(self, hash_value: int) -> tuple[int, ...]:
        """The hand for ``hash_value``, in dealing order (kube's Deal): the hash is read as
        digits of a mixed radix (deck, deck-1, ...), each digit choosing among the cards not
        dealt yet."""
        digits = []
        for i in range(self.hand):
            hash_value, digit = divmod(hash_value, self.deck - i)
            digits.append(digit)
        cards = []
        for i, card in enumerate(digits):
            for j in range(i, 0, -1):
                if card >= digits[j - 1]:
                    card += 1
            cards.append(card)
        return tuple(cards)
