//go:build !race

package admissionfuzz

// RaceDetector tells whether the test binary runs with the race detector
// (see race.go).
const RaceDetector = false
