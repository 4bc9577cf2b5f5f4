package events

import (
	"errors"
	"fmt"
)

// Validation keeps nonsense out of history at both ends: Encode refuses to
// write it and Decode parks it, so folds only ever see well-formed payloads.

func required(pairs ...string) error {
	var errs []error
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			errs = append(errs, fmt.Errorf("%s is required", pairs[i]))
		}
	}
	return errors.Join(errs...)
}

func (e UpgradeRequested) validate() error {
	if err := validatePolicies(e.InitiatorPolicy, e.ReplicaPolicy); err != nil {
		return err
	}
	return required("namespace", e.Namespace, "name", e.Name, "uid", e.UID, "dataEngine", e.DataEngine)
}

func (e PrecheckPassed) validate() error {
	return required("check", e.Check, "reason", e.Reason)
}

func (e PrecheckFailed) validate() error {
	return required("check", e.Check, "reason", e.Reason, "message", e.Message)
}

func (e UpgradePlanned) validate() error {
	if err := required("instanceManagerImage", e.InstanceManagerImage); err != nil {
		return err
	}
	if len(e.Nodes) == 0 {
		return errors.New("nodes must not be empty")
	}
	return nil
}

func (e NodeScheduled) validate() error {
	if e.Attempt < 1 {
		return fmt.Errorf("attempt %d must be >= 1", e.Attempt)
	}
	return required("node", e.Node)
}

func (e NodeFinished) validate() error {
	if !e.State.Terminal() {
		return fmt.Errorf("state %q is not terminal", e.State)
	}
	return required("node", e.Node)
}

func (e UpgradeFailed) validate() error {
	return required("reason", e.Reason, "message", e.Message)
}

func (e NodeUpgradeStarted) validate() error {
	if e.Attempt < 1 {
		return fmt.Errorf("attempt %d must be >= 1", e.Attempt)
	}
	if err := validatePolicies(e.InitiatorPolicy, e.ReplicaPolicy); err != nil {
		return err
	}
	return required("node", e.Node, "dataEngine", e.DataEngine, "instanceManagerImage", e.InstanceManagerImage)
}

// validatePolicies accepts an initiator and a replica policy, or none (a
// history written before there were any).
func validatePolicies(initiators, replicas string) error {
	var errs []error
	switch initiators {
	case "", InitiatorPolicyWait, InitiatorPolicyMoveWorkloads:
	default:
		errs = append(errs, fmt.Errorf("initiatorPolicy %q must be %s or %s", initiators, InitiatorPolicyWait, InitiatorPolicyMoveWorkloads))
	}
	switch replicas {
	case "", ReplicaPolicyRebuild, ReplicaPolicyAddFirst:
	default:
		errs = append(errs, fmt.Errorf("replicaPolicy %q must be %s or %s", replicas, ReplicaPolicyRebuild, ReplicaPolicyAddFirst))
	}
	return errors.Join(errs...)
}

func (e NodeStateChanged) validate() error {
	if !e.From.Valid() || !e.To.Valid() {
		return fmt.Errorf("unknown node state in %q -> %q", e.From, e.To)
	}
	return nil
}

func (e VolumeStateChanged) validate() error {
	if (e.From != "" && !e.From.Valid()) || !e.To.Valid() {
		return fmt.Errorf("unknown volume state in %q -> %q", e.From, e.To)
	}
	return required("volume", e.Volume)
}

func (e NodeStalled) validate() error {
	if !e.Step.Valid() {
		return fmt.Errorf("unknown step %q", e.Step)
	}
	return required("reason", e.Reason, "message", e.Message)
}

func (e NodeResumed) validate() error {
	if !e.Step.Valid() {
		return fmt.Errorf("unknown step %q", e.Step)
	}
	return nil
}

func (e NodeUpgradeFailed) validate() error {
	if !e.Step.Valid() {
		return fmt.Errorf("unknown step %q", e.Step)
	}
	return required("reason", e.Reason, "message", e.Message)
}

func (e NodeUpgradeCancelled) validate() error {
	if !e.Step.Valid() {
		return fmt.Errorf("unknown step %q", e.Step)
	}
	return nil
}

func (e UpgradeHeld) validate() error { return required("reason", e.Reason, "message", e.Message) }

func (e SnapshotsTaken) validate() error { return validateSnapshots(e.Snapshot, e.Volumes) }

func (e SnapshotsRemoved) validate() error { return validateSnapshots(e.Snapshot, e.Volumes) }

func (e NodeTainted) validate() error { return required("key", e.Key) }

func (e NodeUntainted) validate() error { return required("key", e.Key) }

func (e PodMoved) validate() error {
	if len(e.Volumes) == 0 {
		return errors.New("volumes must not be empty")
	}
	return required("pod", e.Pod)
}

func (e HashingRequested) validate() error {
	if e.At.IsZero() || e.Deadline.Before(e.At) {
		return errors.New("at must be set and the deadline not before it")
	}
	return required("volume", e.Volume, "snapshot", e.Snapshot)
}

func (e RebuildPlanned) validate() error {
	if e.ExpectedBytes < 0 || e.FullBytes < 0 || e.HashedBytes < 0 {
		return errors.New("byte counts must not be negative")
	}
	if !e.Hashed && e.Reason == "" {
		return errors.New("reason must be set when the snapshots were not hashed")
	}
	return required("volume", e.Volume)
}

func (e RebuildStarted) validate() error {
	if e.Progress < 0 || e.Progress > 100 {
		return fmt.Errorf("progress %d is not a percentage", e.Progress)
	}
	return required("volume", e.Volume, "replica", e.Replica)
}

func (e RebuildFinished) validate() error { return required("volume", e.Volume) }

func (e TemporaryReplicaRequested) validate() error {
	if e.At.IsZero() || e.Deadline.Before(e.At) {
		return errors.New("at must be set and the deadline not before it")
	}
	if e.NumberOfReplicas < 1 {
		return fmt.Errorf("numberOfReplicas %d must be >= 1", e.NumberOfReplicas)
	}
	return required("volume", e.Volume)
}

func (e ReplicaCountRaised) validate() error {
	if e.NumberOfReplicas < 1 || e.Raised != e.NumberOfReplicas+1 {
		return fmt.Errorf("numberOfReplicas %d raised to %d: want >= 1 raised by one", e.NumberOfReplicas, e.Raised)
	}
	return required("volume", e.Volume)
}

func (e TemporaryReplicaAdded) validate() error {
	return required("volume", e.Volume, "replica", e.Replica, "node", e.Node)
}

func (e ReplicaCountRestored) validate() error {
	if e.NumberOfReplicas < 1 {
		return fmt.Errorf("numberOfReplicas %d must be >= 1", e.NumberOfReplicas)
	}
	if e.Replica == "" && e.Message == "" {
		return errors.New("message must say why no replica was deleted")
	}
	return required("volume", e.Volume)
}

func validateSnapshots(snapshot string, volumes []string) error {
	if len(volumes) == 0 {
		return errors.New("volumes must not be empty")
	}
	return required("snapshot", snapshot)
}

// Validate checks the payload's required fields and enums.
func Validate(e Event) error {
	if v, ok := e.(validator); ok {
		return v.validate()
	}
	return nil
}
