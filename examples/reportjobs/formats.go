package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	"github.com/go-pdf/fpdf"
	"github.com/ledongthuc/pdf"
	"github.com/xuri/excelize/v2"
)

// textFile is a CSV or JSON report: text appended through a buffer, so
// memory stays the buffer's whatever the report's size.
type textFile struct {
	f      *os.File
	w      *bufio.Writer
	footer string
	// encode appends records; first says whether they begin the report.
	encode func(w io.Writer, records []Entry, first bool) error
	first  bool
}

func createText(path, header, footer string, encode func(io.Writer, []Entry, bool) error) (reportFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	t := &textFile{f: f, w: bufio.NewWriter(f), footer: footer, encode: encode, first: true}
	if _, err := t.w.WriteString(header); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return t, nil
}

func (t *textFile) write(records []Entry) error {
	err := t.encode(t.w, records, t.first)
	t.first = false
	return err
}

func (t *textFile) finish() error {
	_, err := t.w.WriteString(t.footer)
	if err == nil {
		err = t.w.Flush()
	}
	if err == nil {
		err = t.f.Sync()
	}
	return errors.Join(err, t.f.Close())
}

func (t *textFile) close() error { return t.f.Close() }

func createCSV(path, _ string) (reportFile, error) {
	return createText(path, "id,employee,day,hours,project,ssn\n", "", func(w io.Writer, records []Entry, _ bool) error {
		cw := csv.NewWriter(w)
		for _, e := range records {
			_ = cw.Write(e.cells())
		}
		cw.Flush()
		return cw.Error()
	})
}

func readCSV(f *os.File, _ int64) ([]string, error) {
	r := csv.NewReader(bufio.NewReader(f))
	var ssns []string
	for i := 0; ; i++ {
		row, err := r.Read()
		if err == io.EOF {
			return ssns, nil
		}
		if err != nil {
			return nil, err
		}
		if i > 0 { // not the header
			ssns = append(ssns, row[len(row)-1])
		}
	}
}

func createJSON(path, _ string) (reportFile, error) {
	return createText(path, "[\n", "\n]\n", func(w io.Writer, records []Entry, first bool) error {
		var buf []byte
		for i, e := range records {
			if i > 0 || !first {
				buf = append(buf, ",\n"...)
			}
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			buf = append(append(buf, "  "...), b...)
		}
		_, err := w.Write(buf)
		return err
	})
}

func readJSON(f *os.File, _ int64) ([]string, error) {
	var all []Entry
	if err := json.NewDecoder(bufio.NewReader(f)).Decode(&all); err != nil {
		return nil, err
	}
	ssns := make([]string, len(all))
	for i, e := range all {
		ssns[i] = e.SSN
	}
	return ssns, nil
}

// xlsxFile is an Excel report, written row by row with excelize's stream
// writer, which keeps up to 16 MB of rows in memory and the rest in a
// temporary file until the workbook is written out.
type xlsxFile struct {
	path string
	book *excelize.File
	rows *excelize.StreamWriter
	next int // the next row's number
}

const sheet = "Sheet1" // excelize's new workbook has it

func createXLSX(path, _ string) (reportFile, error) {
	book := excelize.NewFile()
	rows, err := book.NewStreamWriter(sheet)
	if err == nil {
		err = rows.SetRow("A1", anys(columns))
	}
	if err != nil {
		return nil, errors.Join(err, book.Close())
	}
	return &xlsxFile{path: path, book: book, rows: rows, next: 2}, nil
}

func (x *xlsxFile) write(records []Entry) error {
	for _, e := range records {
		cell, err := excelize.CoordinatesToCellName(1, x.next)
		if err == nil {
			err = x.rows.SetRow(cell, []any{e.ID, e.Employee, e.Day, e.Hours, e.Project, e.SSN})
		}
		if err != nil {
			return err
		}
		x.next++
	}
	return nil
}

// finish writes the workbook to the partial path (SaveAs would refuse its
// extension).
func (x *xlsxFile) finish() (err error) {
	defer func() { err = errors.Join(err, x.book.Close()) }()
	if err := x.rows.Flush(); err != nil {
		return err
	}
	f, err := os.Create(x.path)
	if err != nil {
		return err
	}
	_, err = x.book.WriteTo(f)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

func (x *xlsxFile) close() error { return x.book.Close() }

func readXLSX(f *os.File, _ int64) ([]string, error) {
	book, err := excelize.OpenReader(f)
	if err != nil {
		return nil, err
	}
	defer book.Close()
	rows, err := book.Rows(sheet) // streamed, row by row
	if err != nil {
		return nil, err
	}
	var ssns []string
	for i := 0; rows.Next(); i++ {
		row, err := rows.Columns()
		if err != nil {
			return nil, errors.Join(err, rows.Close())
		}
		if i > 0 {
			if len(row) != len(columns) {
				return nil, errors.Join(fmt.Errorf("row %d has %d cells", i+1, len(row)), rows.Close())
			}
			ssns = append(ssns, row[len(row)-1])
		}
	}
	return ssns, errors.Join(rows.Error(), rows.Close())
}

// pdfFile is a PDF report: a table, its header repeated on every page.
// fpdf builds the document in memory and writes it out at the end: unlike
// the other formats, its memory grows with the report, by some 420 bytes a
// record (measured at 100,000), 420 MB a million. Reports that large are
// better written as Excel or CSV, or split by county and week.
type pdfFile struct {
	path string
	doc  *fpdf.Fpdf
}

// pdfWidths are the columns' widths, in millimetres.
var pdfWidths = []float64{22, 22, 26, 18, 20, 32}

func createPDF(path, county string) (reportFile, error) {
	doc := fpdf.New("P", "mm", "A4", "")
	doc.SetTitle(county+" timesheet entries", false)
	doc.SetHeaderFunc(func() {
		doc.SetFont("Helvetica", "B", 9)
		for i, c := range columns {
			doc.CellFormat(pdfWidths[i], 6, c, "B", 0, "L", false, 0, "")
		}
		doc.Ln(-1)
		doc.SetFont("Helvetica", "", 9)
	})
	doc.AddPage()
	return &pdfFile{path: path, doc: doc}, doc.Error()
}

func (p *pdfFile) write(records []Entry) error {
	for _, e := range records {
		for i, c := range e.cells() {
			p.doc.CellFormat(pdfWidths[i], 5, c, "", 0, "L", false, 0, "")
		}
		p.doc.Ln(-1)
	}
	return p.doc.Error()
}

func (p *pdfFile) finish() error { return p.doc.OutputFileAndClose(p.path) }

func (p *pdfFile) close() error { return nil }

// readPDF reads the cells' text, page by page: a header of the columns'
// names, then each record's cells, none of them empty.
func readPDF(f *os.File, size int64) ([]string, error) {
	r, err := pdf.NewReader(f, size)
	if err != nil {
		return nil, err
	}
	var ssns []string
	for i := 1; i <= r.NumPage(); i++ {
		rows, err := r.Page(i).GetTextByRow()
		if err != nil {
			return nil, fmt.Errorf("page %d: %w", i, err)
		}
		var cells []string
		for _, row := range rows {
			for _, t := range row.Content {
				if t.S != "" {
					cells = append(cells, t.S)
				}
			}
		}
		if len(cells) < len(columns) || !slices.Equal(cells[:len(columns)], columns) || len(cells)%len(columns) != 0 {
			return nil, fmt.Errorf("page %d: not a header and whole records: %d cells", i, len(cells))
		}
		for rec := cells[len(columns):]; len(rec) > 0; rec = rec[len(columns):] {
			if _, err := strconv.ParseInt(rec[0], 10, 64); err != nil {
				return nil, fmt.Errorf("page %d: a record's ID is %q", i, rec[0])
			}
			ssns = append(ssns, rec[len(columns)-1])
		}
	}
	return ssns, nil
}

// anys converts strings to cell values.
func anys(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
