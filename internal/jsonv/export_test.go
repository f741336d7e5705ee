package jsonv

// ValidText reports whether Parse's text checks pass, for FuzzParsersAgree.
func ValidText(data []byte) bool { return checkText(data) == nil }

// Scan is the Worker's parser, for FuzzParsersAgree natively.
var Scan = scan
