package redis

import (
	"testing"

	"github.com/simba-go/simba/tck"
)

// ClientSpec: Election, Lock and PartitionGroup through real simba.Clients on this backend.
func TestClientSpecStandalone(t *testing.T) { tck.ClientSpec(t, standaloneFactory(t)) }
func TestClientSpecCluster(t *testing.T)    { tck.ClientSpec(t, clusterFactory(t)) }

// FairnessSpec: the waiter queue (spi.Queuer) and the starvation scenario.
func TestFairnessSpecStandalone(t *testing.T) { tck.FairnessSpec(t, standaloneFactory(t)) }
func TestFairnessSpecCluster(t *testing.T)    { tck.FairnessSpec(t, clusterFactory(t)) }
