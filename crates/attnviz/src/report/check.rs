//! [`Plan::check`]: what a plan asks of an attention, refused before anything is written.

use crate::attention::AttentionSet;
use crate::render::image::picture::{self, Query};

use super::write::shown_kind;
use super::{Plan, ReportError};

impl Plan {
    /// Check the plan against the run's token-level attention `set`, before anything is
    /// written: the kind to show is one of the set's, the layer and head are among its own, a
    /// query patch is on the picture's grid (whichever outputs were asked for: the HTML report
    /// and JSON too, not only the pictures), a pooled query has a pooling head, and the
    /// picture options have a picture to draw on.
    pub fn check(&self, set: &AttentionSet) -> Result<(), ReportError> {
        let (index, _) = shown_kind(self, set)?;
        let att = set.iter().nth(index).expect("the kind was found");
        let query = self.figure.query;
        match &att.image {
            Some(_) => {
                if let Query::Patch(..) | Query::Token(_) | Query::Generated = query {
                    picture::query_unit(att, query)?;
                }
                picture::pooling_of(att, query)?;
            }
            // A vision-language model's query is a token's number.
            None if !att.pictures.is_empty() => {
                crate::render::image::on_picture::query_unit(att, query)?;
            }
            None if query != Query::Cls || self.figure.image_rollout.is_some() => {
                return Err(ReportError::NoPicture)
            }
            None => {}
        }
        Ok(())
    }

    /// Refuse what a summarised run cannot give: figures and a report folder draw matrices (the
    /// HTML report of a summarised run draws its summaries).
    pub fn check_summarised(&self) -> Result<(), ReportError> {
        let f = &self.files;
        if f.png.is_some() || f.svg.is_some() || f.report.is_some() {
            return Err(ReportError::SummarisedDrawing);
        }
        Ok(())
    }
}
