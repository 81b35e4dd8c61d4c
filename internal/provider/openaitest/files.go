package openaitest

import (
	"io"
	"net/http"
	"slices"
)

type file struct {
	id        string
	createdAt int64
	filename  string
	purpose   string
	content   []byte
	// fetches left answered "uploaded"; then the file is processed, or in
	// error when errDetail is set.
	pending   int
	errDetail string
}

func (f *file) status() string {
	switch {
	case f.pending > 0:
		return "uploaded"
	case f.errDetail != "":
		return "error"
	}
	return "processed"
}

func (f *file) view() map[string]any {
	v := map[string]any{
		"id": f.id, "object": "file", "bytes": len(f.content), "created_at": f.createdAt,
		"filename": f.filename, "purpose": f.purpose, "status": f.status(),
	}
	if f.status() == "error" {
		v["status_details"] = f.errDetail
	}
	return v
}

// maxUpload bounds an upload held in memory.
const maxUpload = 64 << 20

var purposes = []string{"assistants", "batch", "fine-tune", "vision", "user_data", "evals"}

func (s *Server) createFile(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseMultipartForm(maxUpload); err != nil {
		writeError(w, http.StatusBadRequest, "Could not parse multipart form: "+err.Error(), "file", "")
		return
	}
	purpose := r.FormValue("purpose")
	if !slices.Contains(purposes, purpose) {
		writeError(w, http.StatusBadRequest, "Invalid value for 'purpose'.", "purpose", "")
		return
	}
	part, header, err := r.FormFile("file")
	if err != nil {
		writeError(w, http.StatusBadRequest, "Missing required parameter: 'file'.", "file", "")
		return
	}
	defer part.Close()
	content, err := io.ReadAll(part)
	if err != nil {
		writeError(w, http.StatusBadRequest, "Could not read file: "+err.Error(), "file", "")
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.next()
	f := &file{
		id: idOf("file", n), createdAt: s.stamp(), filename: header.Filename, purpose: purpose,
		content: content, pending: s.script.FileProcessingPolls, errDetail: s.script.FileError,
	}
	s.addFile(f)
	s.filesCreated++
	// The answer to an upload reports the file as just uploaded.
	v := f.view()
	v["status"] = "uploaded"
	writeJSON(w, http.StatusOK, v)
}

// addFile stores f. The caller holds s.mu.
func (s *Server) addFile(f *file) {
	s.files[f.id] = f
	s.fileOrder = append(s.fileOrder, f.id)
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	purpose := r.URL.Query().Get("purpose")
	var views []map[string]any
	for _, id := range s.fileOrder {
		if f := s.files[id]; purpose == "" || f.purpose == purpose {
			views = append(views, f.view())
		}
	}
	if r.URL.Query().Get("order") != "asc" {
		slices.Reverse(views)
	}
	writeJSON(w, http.StatusOK, list(r, views, viewID, 10000))
}

func viewID(v map[string]any) string { return v["id"].(string) }

func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[r.PathValue("id")]
	if !ok {
		writeError(w, http.StatusNotFound, "No such File object: "+r.PathValue("id"), "id", "")
		return
	}
	if f.pending > 0 {
		f.pending--
		// This fetch still sees the file uploading.
		v := f.view()
		v["status"] = "uploaded"
		writeJSON(w, http.StatusOK, v)
		return
	}
	writeJSON(w, http.StatusOK, f.view())
}

func (s *Server) fileContent(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	f, ok := s.files[r.PathValue("id")]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "No such File object: "+r.PathValue("id"), "id", "")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(f.content)
}
