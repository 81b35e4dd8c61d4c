package handlers

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/views"
)

// Users lists the organisation's users with the add-user form.
func (h *Handlers) Users(c echo.Context) error {
	return h.renderUsers(c, http.StatusOK, views.UserForm{Role: "curator"}, nil)
}

func (h *Handlers) renderUsers(c echo.Context, status int, form views.UserForm, fieldErrs map[string]string) error {
	caller := CallerOf(c)
	users, err := h.Accounts.ListUsers(ctx(c), caller.OrgID)
	if err != nil {
		return err
	}
	v := views.UsersView{Form: form, Errors: fieldErrs}
	for _, u := range users {
		v.Users = append(v.Users, views.UserRow{ID: u.ID.String(), Email: u.Email, Name: u.Name, Role: string(u.Role),
			Active: u.Active, CreatedAt: views.When(u.CreatedAt), IsSelf: u.ID == caller.UserID})
	}
	return render(c, status, views.UsersPage(h.page(c, "Users", "users"), v))
}

// UserCreate adds a user; a bad form is shown again with its messages.
func (h *Handlers) UserCreate(c echo.Context) error {
	in := accounts.NewUser{Email: c.FormValue("email"), Name: c.FormValue("name"), Role: c.FormValue("role"), Password: c.FormValue("password")}
	u, err := h.Accounts.CreateUser(ctx(c), actor(c), CallerOf(c).OrgID, in)
	var invalid *errs.Invalid
	if errors.As(err, &invalid) {
		return h.renderUsers(c, http.StatusUnprocessableEntity, views.UserForm{Email: in.Email, Name: in.Name, Role: in.Role}, invalid.ByField())
	}
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", "Added "+u.Email+" as "+string(u.Role)+".")
	return redirect(c, "/admin/users")
}

// UserRole changes a user's role.
func (h *Handlers) UserRole(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	u, err := h.Accounts.ChangeRole(ctx(c), actor(c), CallerOf(c).OrgID, id, c.FormValue("role"))
	if err != nil {
		return err
	}
	h.Sessions.Flash(c, "ok", u.Email+" is now "+string(u.Role)+".")
	return redirect(c, "/admin/users")
}

// UserActive deactivates or reactivates a user.
func (h *Handlers) UserActive(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	caller := CallerOf(c)
	if id == caller.UserID {
		return &errs.Conflict{Message: "you cannot deactivate yourself"}
	}
	active := c.FormValue("active") == "true"
	u, err := h.Accounts.SetActive(ctx(c), actor(c), caller.OrgID, id, active)
	if err != nil {
		return err
	}
	msg := u.Email + " is deactivated."
	if u.Active {
		msg = u.Email + " is active again."
	}
	h.Sessions.Flash(c, "ok", msg)
	return redirect(c, "/admin/users")
}
