"""Test support for kthena_py: helpers that tests and local runs share.

Nothing in this package is imported by the controller-manager itself. The subpackage
:mod:`kthena_py.testing.controlplane` starts a real etcd + kube-apiserver (and optionally
kube-controller-manager, kwok and Volcano's scheduler) on loopback.
"""
