package db

// The queue's query texts, for the tests that read their plans.
var (
	FeedbackListSQL         = feedbackList
	FeedbackStatusCountsSQL = feedbackCountByStatus
	FeedbackMatchingIDsSQL  = feedbackListMatchingIDs
	FeedbackNextSQL         = feedbackGetNext
	FeedbackPreviousSQL     = feedbackGetPrevious
	FeedbackPositionSQL     = feedbackCountPosition
)
