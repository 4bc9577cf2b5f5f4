package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

// This file is what an operator, or Longhorn's own upgrade, does to the
// cluster under an upgrade: cordoning a node, changing Longhorn's default
// instance-manager image, rolling out a longhorn-manager, running
// erasure-coded shards. None of it is part of dataplane: tests use it to
// change the cluster as a user would.

// Cordon sets the Kubernetes node's spec.unschedulable: Longhorn creates no
// instance-manager pod there (RuleNoIMOnCordonedNode), so an IM replaced
// while it is cordoned waits, stopped.
func (s *Sim) Cordon(nodeName string) error {
	return s.setCordoned(nodeName, true)
}

// Uncordon clears spec.unschedulable; a waiting IM starts.
func (s *Sim) Uncordon(nodeName string) error {
	return s.setCordoned(nodeName, false)
}

func (s *Sim) setCordoned(nodeName string, cordoned bool) error {
	return s.act(context.Background(), "SetCordoned", nodeName, fmt.Sprint(cordoned), func(time.Time) (bool, error) {
		n, err := s.node(nodeName)
		if err != nil {
			return false, fmt.Errorf("cordon: %w", err)
		}
		if n.cordoned == cordoned {
			return false, nil
		}
		n.cordoned = cordoned
		if !cordoned {
			s.unblock = true
		}
		s.markNode(nodeName)
		return true, nil
	})
}

// SetDefaultIMImage changes Longhorn's default-instance-manager-image, as a
// Longhorn upgrade does (every longhorn-manager restarts with the new
// --instance-manager-image and writes the setting). The node controller
// then deletes the idle IMs of other images and creates default-image ones
// (RuleDefaultIMFollowsSetting; without it, only the setting changes).
// SetManagerImage rolls one node's manager back or forward on its own.
func (s *Sim) SetDefaultIMImage(image string) error {
	return s.act(context.Background(), "SetDefaultIMImage", "", image, func(time.Time) (bool, error) {
		if image == "" {
			return false, fmt.Errorf("set default instance-manager image: empty image: %w", ErrInvalid)
		}
		if s.setting == image {
			return false, nil
		}
		s.setting = image
		if !s.on(RuleDefaultIMFollowsSetting) {
			return true, nil
		}
		s.cfg.DefaultIMImage = image
		for _, name := range s.nodeNames {
			s.nodes[name].managerImage = image
			s.imCheck[name] = struct{}{}
		}
		return true, nil
	})
}

// SetManagerImage sets the --instance-manager-image the node's
// longhorn-manager runs with, as a DaemonSet rollout in progress leaves it:
// the node controller creates the node's default-image IM only once it is
// the default.
func (s *Sim) SetManagerImage(nodeName, image string) error {
	return s.act(context.Background(), "SetManagerImage", nodeName, image, func(time.Time) (bool, error) {
		n, err := s.node(nodeName)
		if err != nil {
			return false, fmt.Errorf("set manager image: %w", err)
		}
		if n.managerImage == image {
			return false, nil
		}
		n.managerImage = image
		s.imCheck[nodeName] = struct{}{}
		return true, nil
	})
}

// SetShards sets how many erasure-coded shard instances the node's IM
// runs (Longhorn does not count them before it removes an IM:
// RuleShardsNotCounted).
func (s *Sim) SetShards(nodeName string, shards int) error {
	return s.act(context.Background(), "SetShards", nodeName, fmt.Sprint(shards), func(time.Time) (bool, error) {
		n, err := s.node(nodeName)
		if err != nil {
			return false, fmt.Errorf("set shards: %w", err)
		}
		if n.shards == shards {
			return false, nil
		}
		n.shards = shards
		s.markNode(nodeName)
		return true, nil
	})
}

// ManagerImage returns the --instance-manager-image the node's
// longhorn-manager runs with.
func (s *Sim) ManagerImage(nodeName string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.node(nodeName)
	if err != nil {
		return "", err
	}
	return n.managerImage, nil
}

// SetMultipath sets the node's kernel nvme_core.multipath as its worker
// reports it (a module option, so in practice the node rebooted with
// another one): with N, a switch-over of a blockdev volume attached there
// loses the volume's path (RuleNoSecondPathWithoutMultipath).
func (s *Sim) SetMultipath(nodeName string, m dataplane.Multipath) error {
	return s.act(context.Background(), "SetMultipath", nodeName, m.Show(), func(time.Time) (bool, error) {
		n, err := s.node(nodeName)
		if err != nil {
			return false, fmt.Errorf("set multipath: %w", err)
		}
		if n.multipath == m {
			return false, nil
		}
		n.multipath = m
		s.markNode(nodeName)
		return true, nil
	})
}
