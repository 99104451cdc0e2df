// Package tbank is the sandbox emulator of the T-Bank (Tinkoff) internet
// acquiring API v2, built on the sandbox framework (docs/targets.md):
//
//   - POST /v2/Init, /v2/Charge, /v2/CheckOrder, /v2/GetState, /v2/Cancel;
//     JSON bodies, HTTP 200 with {"Success","ErrorCode","Message","Details"}
//     for business errors;
//   - every request is signed: Token = hex SHA-256 over the values of the
//     root-level scalar parameters plus Password, sorted by key (nested
//     objects such as DATA and Receipt, and Token itself, are left out). An
//     unknown TerminalKey or a wrong Token is ErrorCode "204";
//   - OrderId is at most 36 characters [3P]; a repeated OrderId on Init is
//     refused with ErrorCode "8" «Неверный статус транзакции» [3P: an
//     integrator's report]. Whether every terminal does so is unconfirmed
//     (docs/targets.md, research notes): Options.DuplicateOrderIDs makes Init accept it;
//   - Init creates a payment in status NEW (no money moves); Charge with a
//     RebillId moves the money: CONFIRMED, or REJECTED with the issuer's
//     code (Options.Declines: by default RebillInsufficientFunds → "1051",
//     RebillDeclined → "1001"; T-Bank's documentation names no test RebillIds, so these
//     are the emulator's own). Charge on a payment that is not NEW is "8";
//   - CheckOrder returns every payment of an OrderId (an unknown OrderId
//     returns Success with no payments [??]);
//   - Cancel refunds (Amount, optional ExternalRequestId: a repeat with the
//     same ExternalRequestId returns the current state and refunds nothing
//     more [3P: official OpenAPI via likemusic SDK]).
//
// Effects recorded in the ledger: each Charge that reached the card network
// (kind "charge", or "charge_rejected" for a decline) under the payment's
// OrderId, and each refund (kind "refund") under its ExternalRequestId (the
// PaymentId when none was sent). Init is classified as a read for fault
// scopes: it registers an order and moves no money, so "create" faults hit
// Charge and Cancel. With the ignore-key connector fault, Init does not check
// OrderId uniqueness and Cancel ignores ExternalRequestId.
//
// Imports: the standard library and sandbox only.
package tbank
