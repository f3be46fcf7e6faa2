"""A plug-in algorithm that lives outside Menger, as a user's package would: `vpg`, REINFORCE with a learned
baseline (Williams 1992; returns to the unroll's end, bootstrapped from the baseline there). Its dist-info's
entry point (`menger.algorithms`: vpg = menger_test_algorithm.spec:ALGORITHM) is all that registers it."""
