package amocrm

import "github.com/idemgate/idemgate/adapters"

var _ adapters.ObjectLinker = (*Adapter)(nil)

// ObjectURL implements adapters.ObjectLinker: a lead's card in the account
// (crm.deal.create). Tasks have no page of their own: no link.
func (a *Adapter) ObjectURL(operationType, objectID string) string {
	if operationType != OpDealCreate {
		return ""
	}
	return adapters.NumericObjectURL(a.cfg.BaseURL, "/leads/detail/", objectID, "")
}
