"""The stages one chat request passes through, in order; :class:`router_core.gateway.chat.ChatRunner` runs them.

1. **screen** (:mod:`.screen`): the body parsed, client and shedding buckets, the prefilter.
2. **analyse and policy** (:mod:`.analyse`): features, the experiment arm, intent, keywords, the rule matched.
3. **admit** (:mod:`.admit`): the rule's throttle, the router's mode, the session's binding, context window
   and attachment checks; the decision context.
4. **decide** (:mod:`.decide`): the in-flight-adjusted state, the router's decision, the shadow's job.
5. **forward with fallbacks** (:class:`router_core.gateway.forward.Forwarder`).
6. **degrade** (:mod:`.degrade`): when no instance is feasible.
7. **respond** (:mod:`.respond`): the answer relayed.
8. **finish** (:class:`router_core.gateway.finisher.TraceFinisher`): counted, and the trace emitted.

Each stage is a function over its explicit dependencies that returns what it found; none writes
the trace, which the runner alone records (:class:`router_core.decide.recorder.TraceRecorder`).
"""
