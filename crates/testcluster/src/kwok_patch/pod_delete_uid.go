// Added to KWOK's controllers package by k8sm-testcluster (see kwok_patch.rs).

package controllers

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podDeleteOptions deletes only the pod KWOK observed. KWOK deletes terminating pods by name, and a delete queued
// for a StatefulSet pod that was already replaced (same name, new UID) would kill the replacement; the UID
// precondition turns that stale delete into a harmless 409 Conflict, which KWOK logs and does not retry.
func podDeleteOptions(pod *corev1.Pod) metav1.DeleteOptions {
	opt := deleteOpt
	opt.Preconditions = metav1.NewUIDPreconditions(string(pod.UID))
	return opt
}
