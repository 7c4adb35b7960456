"""The stages one chat request passes through, in order; :class:`router_core.gateway.chat.ChatRunner` runs them.

1. **screen** (:mod:`.screen`): the body parsed, client and shedding buckets, the prefilter. The
   runner then computes the request's features itself
   (:func:`router_core.decide.analysis.analyse_request`) and picks its lane, the experiment arm
   whose router decides it (:meth:`~router_core.gateway.chat.ChatRunner.lane`, through
   :func:`.analyse.lane`).
2. **analyse and policy** (:mod:`.analyse`): on those features, the intent, keywords and the rule
   matched (:class:`router_core.gateway.policy_gate.PolicyGate`), and the shadow's, if it runs.
3. **admit** (:mod:`.admit`): the rule's throttle, the router's mode, the session's binding, context window
   and attachment checks; the decision context.
4. **decide** (:mod:`.decide`): the in-flight-adjusted state, the router's decision, the shadow's job.
5. Then one of:

   - **degrade** (:mod:`.degrade`): when the decision has no target and no degraded end: a lighter
     body decided again, the answer cache, the responder, or a refusal;
   - **forward with fallbacks** (:class:`router_core.gateway.forward.Forwarder`); when every
     attempt failed and the rule chain ends in a degraded (non-LLM) target, the runner answers from
     that target itself (:func:`router_core.gateway.degraded.answer_from`, in ``ChatRunner._serve``),
     not this stage.
6. **respond** (:mod:`.respond`): the answer relayed.
7. **finish** (:class:`router_core.gateway.finisher.TraceFinisher`): counted, and the trace emitted:
   before a whole answer is sent, but after a stream's last chunk (a stream is sent whole first).

Each stage is a function over its explicit dependencies that returns what it found; none writes
the trace, which the runner alone records (:class:`router_core.decide.recorder.TraceRecorder`).
"""
