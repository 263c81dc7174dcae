"""Abstract sim-to-real on legs: legged navigation in a point-mass (unicycle) simulator, grounded
with Go1 rollouts and evaluated on the Go1.

- :mod:`.engine`: the abstract engine — a batched unicycle whose action is the Go1's velocity
  command — and its knobs (gains, response, delay);
- :mod:`.tasks`: the navigation tasks (goal, walls as axis-aligned boxes, a route) and their terms,
  pure functions of the abstract state that both engines use;
- :mod:`.policy`: the navigation policy (a reactive route follower) and its training by the
  cross-entropy method in a (grounded) abstract simulator;
- :mod:`.grounded`, :mod:`.fit`: the grounding methods (none, dr, sysid, markov, gat, history)
  applied to the abstract engine, fitted with the grounding package's code on Go1 transitions;
- :mod:`.go1_side`: the abstraction φ of the Go1's state, the Go1 with walls as MuJoCo geoms, the
  recording of Go1 rollouts and the evaluation of navigation policies on the Go1.
"""
