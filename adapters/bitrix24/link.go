package bitrix24

import "github.com/idemgate/idemgate/adapters"

var _ adapters.ObjectLinker = (*Adapter)(nil)

// ObjectURL implements adapters.ObjectLinker: a deal's card in the portal.
// Activities (crm.task.create) open inside their owner's card and have no
// page of their own: no link.
func (a *Adapter) ObjectURL(operationType, objectID string) string {
	if operationType != OpDealCreate {
		return ""
	}
	return adapters.NumericObjectURL(a.cfg.PortalURL, "/crm/deal/details/", objectID, "/")
}
