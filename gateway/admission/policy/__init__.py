"""ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1), enforced as kube-apiserver
1.32 enforces it (apiserver admission/plugin/policy/validating and .../generic).

``plugin`` is the admission plugin (which policies and bindings apply, their params, the
actions of their decisions, kube's errors); ``matching`` matches matchResources; ``params``
finds a binding's params; ``compiled`` is a policy compiled, ``validator`` runs it on one
write; ``typechecking`` checks a policy's expressions against the schemas of the kinds it
matches, and ``status`` is the controller that writes what it finds to the policy's status.
"""
