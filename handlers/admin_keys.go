package handlers

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/views"
)

// APIKeys lists the organisation's API keys with the create form.
func (h *Handlers) APIKeys(c echo.Context) error {
	return h.renderKeys(c, http.StatusOK, views.KeysView{Form: views.UserForm{Role: "curator"}})
}

func (h *Handlers) renderKeys(c echo.Context, status int, v views.KeysView) error {
	keys, err := h.Accounts.ListAPIKeys(ctx(c), CallerOf(c).OrgID)
	if err != nil {
		return err
	}
	for _, k := range keys {
		v.Keys = append(v.Keys, views.KeyRow{ID: k.ID.String(), Name: k.Name, Prefix: k.Prefix, Role: string(k.Role),
			ActsAs: string(k.ActsAs), Owner: k.OwnerEmail, CreatedAt: views.When(k.CreatedAt), LastUsed: views.WhenPtr(k.LastUsedAt),
			Revoked: k.RevokedAt != nil, Suspended: k.Suspended})
	}
	// The page may hold a secret: never cache it.
	c.Response().Header().Set("Cache-Control", "no-store")
	return render(c, status, views.KeysPage(h.page(c, "API keys", "keys"), v))
}

// APIKeyCreate makes a key and shows its secret once, in this response only.
func (h *Handlers) APIKeyCreate(c echo.Context) error {
	in := accounts.NewKey{Name: c.FormValue("name"), Role: c.FormValue("role")}
	k, secret, err := h.Accounts.CreateAPIKey(ctx(c), actor(c), CallerOf(c).OrgID, in)
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderKeys(c, http.StatusUnprocessableEntity, views.KeysView{Form: views.UserForm{Name: in.Name, Role: in.Role}, Errors: invalid.ByField()})
	}
	if err != nil {
		return err
	}
	return h.renderKeys(c, http.StatusCreated, views.KeysView{NewSecret: secret, NewName: k.Name, Form: views.UserForm{Role: "curator"}})
}

// APIKeyRevoke revokes a key.
func (h *Handlers) APIKeyRevoke(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	k, err := h.Accounts.RevokeAPIKey(ctx(c), actor(c), CallerOf(c).OrgID, id)
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "Revoked the key "+k.Name+".")
	return redirect(c, "/admin/api-keys")
}
