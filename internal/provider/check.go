package provider

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// Check validates the request against the formats a provider trains on
// and the largest file it takes, and checks that the files are there. It
// returns a *ValidationError or nil.
func (r UploadRequest) Check(maxBytes int64, formats ...string) error {
	var errs []FieldError
	if fe := CheckCurateJobID(r.CurateJobID); fe != nil {
		errs = append(errs, *fe)
	}
	if !slices.Contains(formats, r.Format) {
		errs = append(errs, FieldError{Field: "format", Message: fmt.Sprintf("must be one of %s", strings.Join(formats, ", "))})
	}
	if r.TrainPath == "" {
		errs = append(errs, FieldError{Field: "train_path", Message: "is required"})
	} else if fe := checkFile("train_path", r.TrainPath, maxBytes); fe != nil {
		errs = append(errs, *fe)
	}
	if r.ValidPath != "" {
		if fe := checkFile("valid_path", r.ValidPath, maxBytes); fe != nil {
			errs = append(errs, *fe)
		}
	}
	return Invalid(errs)
}

func checkFile(field, path string, maxBytes int64) *FieldError {
	info, err := os.Stat(path)
	switch {
	case err != nil:
		return &FieldError{Field: field, Message: err.Error()}
	case !info.Mode().IsRegular():
		return &FieldError{Field: field, Message: path + " is not a regular file"}
	case info.Size() == 0:
		return &FieldError{Field: field, Message: path + " is empty"}
	case info.Size() > maxBytes:
		return &FieldError{Field: field, Message: fmt.Sprintf("%s has %d bytes, more than the %d the provider takes", path, info.Size(), maxBytes)}
	}
	return nil
}

// CheckCommon returns the field errors every provider shares: the Curate
// job id and the training file. Providers add theirs, and Validate's.
func (r CreateRequest) CheckCommon() []FieldError {
	var errs []FieldError
	if fe := CheckCurateJobID(r.CurateJobID); fe != nil {
		errs = append(errs, *fe)
	}
	if r.TrainFileID == "" {
		errs = append(errs, FieldError{Field: "train_file_id", Message: "is required"})
	}
	return errs
}
