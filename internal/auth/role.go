package auth

import "fmt"

// Role is a user's or API key's level of access. Each role can do what the
// roles below it can.
type Role string

const (
	Viewer  Role = "viewer"
	Curator Role = "curator"
	Admin   Role = "admin"
)

// Roles lists the roles from least to most access.
var Roles = []Role{Viewer, Curator, Admin}

func (r Role) rank() int {
	for i, x := range Roles {
		if x == r {
			return i + 1
		}
	}
	return 0
}

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r.rank() > 0 }

// AtLeast reports whether r grants everything min grants.
func (r Role) AtLeast(min Role) bool { return r.Valid() && r.rank() >= min.rank() }

// ParseRole turns text into a Role, or says which roles exist.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if !r.Valid() {
		return "", fmt.Errorf("unknown role %q: use viewer, curator or admin", s)
	}
	return r, nil
}
