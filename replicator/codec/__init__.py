"""Wire formats. One module per format (`open_protocol`, `craft`), encoder and decoder side by side;
`values` holds the value typing both share so the same upstream value decodes to the same Python value."""
