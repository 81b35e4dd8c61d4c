package handlers

import (
	"net/url"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
)

// AssigneeMe is the assignee a queue link may name instead of an id: the
// signed-in user. "/feedback?assignee=me" reads the same for everyone and
// opens each person's own queue.
const AssigneeMe = "me"

// queueFilter parses the queue's filter from q as feedback.ParseFilter
// does, reading assignee=me as the caller. An API key is no user, so it
// is told to send an id instead.
func queueFilter(c echo.Context, q url.Values) (feedback.Filter, error) {
	if q.Get("assignee") == AssigneeMe {
		caller := CallerOf(c)
		if caller == nil || caller.UserID == uuid.Nil {
			return feedback.Filter{}, errs.InvalidField("assignee", "me names the signed-in user, and an API key is not one: send a user id")
		}
		q = queueCloneQuery(q)
		q.Set("assignee", caller.UserID.String())
	}
	return feedback.ParseFilter(q)
}
