package demo

// scenario is one support question about Tandem, a fictional shared team
// calendar, asked two ways, with a good answer, a weak one, and what a
// curator would write instead of the weak one.
type scenario struct {
	title      string
	asks       [2]string
	good, weak string
	complaint  string // what the person said about the weak answer
	correction string
	unsafe     bool // the weak answer is a safety problem
}

// The demo's support conversations. Some questions carry personal data (an
// e-mail address, a phone number) the way real ones do.
var scenarios = []scenario{
	{
		title: "Reset a forgotten password",
		asks: [2]string{"I forgot my Tandem password, how do I get back in?",
			"Locked out of Tandem. My login is dana.whitfield@example.com, can you reset it?"},
		good:       "Open the sign-in page and choose \"Forgot password\". Enter the e-mail address of your account and we send a reset link that works for 30 minutes. If your company signs in with SSO, reset the password with your identity provider instead.",
		weak:       "Passwords can be changed under Settings.",
		complaint:  "I can't reach Settings, I'm locked out!",
		correction: "Since you cannot sign in, use \"Forgot password\" on the sign-in page: enter your account's e-mail address and follow the link we send (valid for 30 minutes). If your company uses SSO, your identity provider resets it.",
	},
	{
		title: "Export a calendar",
		asks: [2]string{"How can I export my team calendar to a file?",
			"Is there a way to get all our events out of Tandem as ICS?"},
		good:       "Open the calendar, choose the menu next to its name, then \"Export\". You can download an .ics file with every event, or a CSV with one row per event for spreadsheets. Exports include recurring events expanded for the next 12 months.",
		weak:       "Tandem does not support exporting calendars.",
		complaint:  "That's wrong, my colleague exported one yesterday.",
		correction: "Yes: in the calendar's menu choose \"Export\" and pick .ics (for other calendar apps) or CSV (for spreadsheets). Recurring events are expanded for the next 12 months.",
	},
	{
		title: "Time zone of shared events",
		asks: [2]string{"Why do my meetings show an hour off for my colleague in Lisbon?",
			"Events appear at the wrong time for people in other time zones. Bug?"},
		good:       "Each person sees events in the time zone set in their profile. If a colleague's times look an hour off, their profile time zone probably differs from their computer's: ask them to check Profile → Time zone, or turn on \"Use device time zone\".",
		weak:       "Tandem always shows events in UTC, so convert the times manually.",
		complaint:  "We don't want to do math for every meeting.",
		correction: "Times follow each person's profile time zone. Ask your colleague to check Profile → Time zone (or turn on \"Use device time zone\"); the hour difference usually comes from a mismatch there.",
	},
	{
		title: "Refund for an annual plan",
		asks: [2]string{"We upgraded to the annual plan by mistake. Can we get a refund?",
			"Please refund our annual subscription, you can reach me at +1 415 555 0134."},
		good:       "Annual plans can be refunded in full within 14 days of purchase. An owner of the workspace can request it under Billing → Invoices → \"Request refund\"; the money returns to the original card in 5 to 10 business days. After 14 days we can switch you to monthly at the next renewal.",
		weak:       "Refunds are not possible.",
		complaint:  "Your terms say 14 days.",
		correction: "Within 14 days of purchase an annual plan is refunded in full: a workspace owner can request it under Billing → Invoices → \"Request refund\". It reaches the original card in 5 to 10 business days.",
	},
	{
		title: "Invite teammates",
		asks: [2]string{"How do I add my team to our Tandem workspace?",
			"What's the fastest way to invite 40 people?"},
		good:       "Go to Workspace → Members → \"Invite\". You can paste many e-mail addresses at once, or upload a CSV with one address per line. For a whole company, turn on domain sign-up so anyone with your e-mail domain can join without an invitation.",
		weak:       "Send them the link to tandem's website and ask them to sign up.",
		complaint:  "They ended up in separate workspaces.",
		correction: "Invite them from Workspace → Members → \"Invite\" (paste many addresses or upload a CSV). Signing up from the website creates a separate workspace, which is what happened here; those people can be merged in by an admin under Members → \"Pending merges\".",
	},
	{
		title: "Slack integration",
		asks: [2]string{"Can Tandem post meeting reminders in Slack?",
			"How do I connect Slack so the team gets a daily agenda?"},
		good:       "Yes. Under Integrations → Slack, connect your Slack workspace and pick a channel. You can post reminders 10 minutes before events and a daily agenda at a time you choose. Each person can also get reminders as direct messages.",
		weak:       "You can use Zapier for that.",
		complaint:  "We don't have Zapier and there's a built-in integration.",
		correction: "Use the built-in integration: Integrations → Slack, connect the workspace, choose a channel, and turn on the daily agenda and reminders (10 minutes before each event by default).",
	},
	{
		title: "Recurring event exceptions",
		asks: [2]string{"How do I move just one occurrence of a weekly meeting?",
			"Changing one instance of our standup changed all of them. How do I undo that?"},
		good:       "Drag the occurrence to its new time, or open it and edit; Tandem then asks \"This event\" or \"This and following\". Choose \"This event\" to move only one. To undo a change that applied to all, open the series' history and restore the previous version.",
		weak:       "Delete the series and create it again.",
		complaint:  "That lost all the notes attached to the meetings.",
		correction: "Edit the one occurrence and choose \"This event\" when asked. To undo a change applied to the whole series, open the series' history (menu → History) and restore the earlier version; notes are kept.",
	},
	{
		title: "Delete an account",
		asks: [2]string{"I want my account and all my data deleted.",
			"Under GDPR please erase everything you hold about me."},
		good:       "You can delete your account under Profile → Privacy → \"Delete my account\". Your personal data is erased within 30 days, backups included. Events you created in shared calendars stay for your colleagues but no longer show your name. You can download your data first from the same page.",
		weak:       "Just stop using Tandem and your account will expire.",
		complaint:  "Accounts don't expire and that isn't erasure.",
		correction: "Use Profile → Privacy → \"Delete my account\": your personal data is erased within 30 days, backups included. You can download a copy of your data there first.",
	},
	{
		title: "API rate limits",
		asks: [2]string{"We keep getting 429 from the Tandem API. What are the limits?",
			"What's the API rate limit per token?"},
		good:       "Each API token may make 600 requests per minute, with bursts of up to 100. A 429 answer carries a Retry-After header in seconds: wait that long before retrying. For bulk work use the batch endpoints, which count as one request per 100 events.",
		weak:       "There are no rate limits on the API.",
		complaint:  "There obviously are, we get 429s.",
		correction: "The limit is 600 requests per minute per token, bursts up to 100. On a 429, wait the number of seconds in Retry-After. Batch endpoints count one request per 100 events.",
	},
	{
		title: "Mobile notifications",
		asks: [2]string{"I don't get notifications on my phone anymore.",
			"Tandem on Android stopped alerting me before meetings."},
		good:       "Check three things: notifications are allowed for Tandem in the phone's settings, the app's own Settings → Notifications has reminders on, and battery saving is not stopping Tandem in the background (on Android, set Tandem to \"Unrestricted\" battery use).",
		weak:       "Reinstall the app.",
		complaint:  "Reinstalling didn't help.",
		correction: "Check that the phone allows notifications for Tandem, that reminders are on in the app's Settings → Notifications, and on Android that battery use for Tandem is \"Unrestricted\" so it can alert in the background.",
	},
	{
		title: "Single sign-on",
		asks: [2]string{"How do we set up SSO with Okta?",
			"Does Tandem support SAML single sign-on?"},
		good:       "SAML SSO is available on the Business plan. An admin opens Workspace → Security → SSO, copies Tandem's ACS URL and entity ID into a new SAML app in Okta, then pastes Okta's metadata URL back into Tandem. Test with one account before enforcing SSO for everyone.",
		weak:       "SSO is available on all plans; just turn it on.",
		complaint:  "The toggle isn't there on our plan.",
		correction: "SAML SSO needs the Business plan. Then: Workspace → Security → SSO, copy the ACS URL and entity ID into a SAML app in Okta, paste Okta's metadata URL into Tandem, test with one account, and enforce.",
	},
	{
		title: "Plans and prices",
		asks: [2]string{"What's the difference between Team and Business?",
			"Which plan do we need for 25 people with SSO?"},
		good:       "Team costs $8 per person per month and includes shared calendars, booking pages and integrations. Business costs $14 and adds SAML SSO, audit logs, data residency and priority support. For 25 people with SSO you need Business: $350 a month, or $3,360 a year billed annually.",
		weak:       "Business is the same as Team with more storage.",
		complaint:  "Business also has SSO, doesn't it?",
		correction: "Business ($14 per person per month) adds SAML SSO, audit logs, data residency and priority support to Team ($8). With SSO for 25 people you need Business: $350 a month.",
	},
	{
		title: "Offline mode",
		asks: [2]string{"Does the desktop app work offline?",
			"Can I see my schedule on a plane without wifi?"},
		good:       "Yes. The desktop and mobile apps keep the last 90 days and the next 180 days available offline. You can read events and create new ones; they sync when you are back online. Booking pages and availability need a connection.",
		weak:       "No, Tandem needs an internet connection.",
		complaint:  "The help center says otherwise.",
		correction: "The apps keep 90 days back and 180 days ahead offline; you can read and create events, which sync when you reconnect. Booking pages need a connection.",
	},
	{
		title: "Booking page domain",
		asks: [2]string{"Can our booking page use our own domain?",
			"How do I put the booking page on book.ourcompany.com?"},
		good:       "Yes, on Team and Business. Under Booking → Domain, enter the subdomain, then add the CNAME record we show at your DNS provider. The certificate is issued automatically once the record resolves, usually within an hour.",
		weak:       "Embed the page in an iframe on your website.",
		complaint:  "I asked about a custom domain, not embedding.",
		correction: "Under Booking → Domain enter book.ourcompany.com and add the CNAME record shown at your DNS provider; the TLS certificate is issued automatically once it resolves, usually within an hour.",
	},
	{
		title: "Two-factor authentication",
		asks: [2]string{"I lost my phone and can't pass two-factor. What now?",
			"My 2FA app is gone with my old phone, account is sam.okafor@example.org."},
		good:       "Sign in with one of the backup codes you saved when you turned on two-factor authentication; each works once. Without backup codes, a workspace admin can reset your two-factor setup under Members, or our support team can after verifying your identity. Then set up two-factor again on the new phone.",
		weak:       "Ask a colleague to send you their backup code and sign in with it, then turn two-factor off so this doesn't happen again.",
		complaint:  "Sharing codes and turning off 2FA can't be right.",
		correction: "Never use someone else's backup codes. Sign in with one of your own backup codes, or ask a workspace admin (or our support, after identity verification) to reset your two-factor setup, then enrol the new phone.",
		unsafe:     true,
	},
	{
		title: "Seeing a colleague's private events",
		asks: [2]string{"How can I see what's in my manager's private events?",
			"Is there a way to read the details of events marked private by others?"},
		good:       "Private events show only as busy time to others, and that is deliberate: their details are visible to the owner and to people they invited. If you need more, ask your manager to share their calendar with you with \"See all event details\".",
		weak:       "Admins can open any calendar with the admin API and read private events; ask IT for a token.",
		complaint:  "This feels like a privacy violation.",
		correction: "Private events show only as busy to others, by design. Ask your manager to share their calendar with \"See all event details\" if you need them; there is no way around that choice.",
		unsafe:     true,
	},
}
