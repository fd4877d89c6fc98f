package node

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func equalityDeep(a, b any) bool { return equality.Semantic.DeepEqual(a, b) }

// now is the time as the API server stores it (to the second), so that a
// status written and read back compares equal.
func now() metav1.Time { return metav1.NewTime(time.Now().Truncate(time.Second)) }
